/**
 * The referral service's RPC port closes idle HTTP/2 connections: a session with no frames for
 * the idle timeout gets GOAWAY and is closed, so idle connections cannot pile up on the port
 * (RPC_IDLE_SESSION_TIMEOUT_MS in services/referral-service/server.ts, docs/limits.md). The
 * timeout is shortened here so the test is fast; nothing here reaches a database.
 */
import test from "ava";
import http2 from "node:http2";
import { createReferralServiceServer, RPC_IDLE_SESSION_TIMEOUT_MS, type ReferralServiceDeps } from "../../services/referral-service/server.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createMetrics } from "../../services/shared/runtime/metrics.js";

/** Deps no call reaches (the test sends no RPC): the server is only built and listened on. */
function idleDeps(idleSessionTimeoutMs: number): ReferralServiceDeps {
  return {
    prisma: {} as ReferralServiceDeps["prisma"],
    secretBox: {} as ReferralServiceDeps["secretBox"],
    log: createLogger("rpc-idle-test", "silent"),
    metrics: createMetrics("rpc-idle-test"),
    now: () => new Date(),
    allowInsecureCallbacks: false,
    callbackTimeoutMs: 1_000,
    publicBaseUrl: "http://127.0.0.1:9",
    loginLinkBaseUrl: "http://127.0.0.1:9",
    idleSessionTimeoutMs,
  } as ReferralServiceDeps;
}

/** Opens a session and resolves with what the server did within `withinMs`: GOAWAY, close, or nothing. */
function watchIdleSession(port: number, withinMs: number): Promise<{ goaway: boolean; closed: boolean; afterMs: number }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const session = http2.connect(`http://127.0.0.1:${port}`);
    let goaway = false;
    session.on("error", () => undefined);
    session.on("goaway", () => {
      goaway = true;
    });
    const timer = setTimeout(() => {
      session.destroy();
      resolve({ goaway, closed: false, afterMs: Date.now() - started });
    }, withinMs);
    session.on("close", () => {
      clearTimeout(timer);
      resolve({ goaway, closed: true, afterMs: Date.now() - started });
    });
  });
}

test("the default idle timeout is a few minutes: long enough for a quiet gateway, short enough that idle connections do not pile up", (t) => {
  t.true(RPC_IDLE_SESSION_TIMEOUT_MS >= 60_000 && RPC_IDLE_SESSION_TIMEOUT_MS <= 15 * 60_000);
});

test("an idle HTTP/2 session on the RPC port gets GOAWAY and is closed after the idle timeout", async (t) => {
  const rpc = createReferralServiceServer(idleDeps(300));
  const port = await rpc.listen(0);
  try {
    const seen = await watchIdleSession(port, 3_000);
    t.true(seen.goaway, "the server sent GOAWAY");
    t.true(seen.closed, "the session was closed");
    t.true(seen.afterMs >= 250, `not before the idle time (${seen.afterMs} ms)`);
  } finally {
    await rpc.close(100);
  }
});

test("a session the peer keeps silent while a stream stays open is cut after a second idle period", async (t) => {
  const rpc = createReferralServiceServer(idleDeps(300));
  const port = await rpc.listen(0);
  try {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", () => undefined);
    // A request whose body never ends: the graceful close alone would wait for it forever.
    const stream = session.request({ ":method": "POST", ":path": "/referral.v1.ReferralService/RecordClick", "content-type": "application/proto" });
    stream.on("error", () => undefined);
    const closed = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 3_000);
      session.on("close", () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    session.destroy();
    t.true(closed, "the session was cut within two idle periods (plus slack)");
  } finally {
    await rpc.close(100);
  }
});
