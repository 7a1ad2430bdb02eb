/**
 * One `msg` per log line: the server interceptor's line for a refused RPC names what happened in `msg`
 * and carries the refusal's text under `reason`, so a JSON tool that keeps one value per key (JSON.parse,
 * jq) loses neither. The lines are real pino output, parsed as JSON.
 */
import test from "ava";
import { captureLog } from "../helpers/capture-log.js";
import { DomainError, DependencyUnavailable } from "../../services/shared/rpc/errors.js";
import { createServerInterceptor } from "../../services/shared/rpc/interceptors.js";
import { createMetrics } from "../../services/shared/runtime/metrics.js";

/** Runs one RPC through the interceptor whose handler throws `error`; returns the log lines. */
async function linesOf(error: unknown): Promise<string[]> {
  const { log, raw } = captureLog("debug");
  const intercept = createServerInterceptor(log, createMetrics("rpc-log-lines"));
  const req = { header: new Headers({ "x-request-id": "req-1" }), service: { typeName: "test.v1.TestService" }, method: { name: "Do" } };
  const next = async () => {
    throw error;
  };
  await intercept(next as never)(req as never).catch(() => undefined);
  return raw;
}

const msgKeys = (line: string) => line.match(/"msg":/g)?.length ?? 0;

test("a refused RPC's line has one msg, and its reason survives JSON.parse", async (t) => {
  const [line = ""] = await linesOf(new DomainError("not_found", "unknown delivery"));
  t.is(msgKeys(line), 1, line);
  const parsed = JSON.parse(line) as Record<string, unknown>;
  t.is(parsed.msg, "rpc rejected");
  t.is(parsed.reason, "unknown delivery");
  t.is(parsed.requestId, "req-1");
});

test("an RPC refused because the database is unavailable: one msg, the reason and the cause kept", async (t) => {
  const cause = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
  const lines = await linesOf(cause);
  t.is(lines.length, 1);
  const line = lines[0] ?? "";
  t.is(msgKeys(line), 1, line);
  const parsed = JSON.parse(line) as { msg: string; reason: string; level: number; err: { code: string } };
  t.is(parsed.msg, "rpc refused: a dependency is unavailable");
  t.is(parsed.reason, new DependencyUnavailable(1).message);
  t.is(parsed.level, 40);
  t.is(parsed.err.code, "ECONNREFUSED");
});
