import test from "ava";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type ConnectRouter, type HandlerContext, type Transport } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  type ApplyEventRequest,
  ApplyEventResponseSchema,
  ReferralEventType,
  ReferralService,
  ReferralState,
} from "../../gen/proto/referral/v1/referral_pb.js";
import { fromRpcError } from "../../gateway/http-errors.js";
import { DomainError, IllegalTransition, toConnectError } from "../../services/shared/rpc/errors.js";
import { createServiceTransport, createUnaryServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { CONNECT_ES_VERIFIED_VERSION } from "../../services/shared/rpc/unary-transport.js";
import { readFileSync } from "node:fs";

/**
 * The gateway's lean unary transport (services/shared/rpc/unary-transport.ts) against Connect's own
 * (createServiceTransport) on the same stub server: what the caller sees must be the same -
 * messages, response headers and trailers, and for failures the code, message, metadata and
 * details the gateway's error table reads.
 */
const TOKEN = "unary-transport-test-token";

/** What the stub saw of the last call's request headers (the tests run serially, so it is that test's call). */
const seen: { authorization?: string; requestId?: string; contentType?: string; timeout?: string } = {};

function routes(router: ConnectRouter): void {
  router.service(ReferralService, {
    async applyEvent(req: ApplyEventRequest, ctx: HandlerContext) {
      seen.authorization = ctx.requestHeader.get("authorization") ?? undefined;
      seen.requestId = ctx.requestHeader.get("x-request-id") ?? undefined;
      seen.contentType = ctx.requestHeader.get("content-type") ?? undefined;
      seen.timeout = ctx.requestHeader.get("connect-timeout-ms") ?? undefined;
      switch (req.token) {
        case "unknown":
          throw toConnectError(new DomainError("unknown_token", "no such token"));
        case "illegal":
          throw toConnectError(new IllegalTransition("clicked", "qualified"));
        case "overloaded":
          throw new ConnectError("busy", Code.ResourceExhausted, { "x-error-kind": "overloaded", "retry-after": "3" });
        case "slow":
          await new Promise((r) => setTimeout(r, 300));
          break;
        default:
          break;
      }
      ctx.responseHeader.set("x-stub", "header");
      ctx.responseTrailer.set("x-stub-trailer", "trailer");
      return create(ApplyEventResponseSchema, {
        outcome: { case: "applied", value: { referralId: `id-${req.token}`, state: ReferralState.REGISTERED, advanced: true } },
      });
    },
  });
}

let baseUrl = "";
let server: http2.Http2Server;
const sessions = new Set<http2.ServerHttp2Session>();

test.before(async () => {
  server = http2.createServer(connectNodeAdapter({ routes }));
  server.on("session", (s) => sessions.add(s));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

test.after.always(() => {
  for (const s of sessions) s.destroy();
  server.close();
});

const both = (url: string): Array<[string, Transport]> => [
  ["connect", createServiceTransport(url, TOKEN)],
  ["lean", createUnaryServiceTransport(url, TOKEN)],
];

async function call(transport: Transport, token: string, timeoutMs = 5_000) {
  const client = createClient(ReferralService, transport);
  let header: Headers | undefined;
  let trailer: Headers | undefined;
  try {
    const res = await client.applyEvent(
      { serverId: "s", event: ReferralEventType.REGISTERED, token, refereeIdentity: "r", serverEventId: "e", kid: "k" },
      { headers: { "x-request-id": "req-1" }, timeoutMs, onHeader: (h) => (header = h), onTrailer: (t) => (trailer = t) },
    );
    return { ok: res.outcome, header: header?.get("x-stub"), trailer: trailer?.get("x-stub-trailer") };
  } catch (error) {
    const e = error as ConnectError;
    return {
      code: e.code,
      message: e.rawMessage,
      kind: e.metadata.get("x-error-kind"),
      retryAfter: e.metadata.get("retry-after"),
      reply: fromRpcError(e, "ingest").reply,
    };
  }
}

test.serial("a successful call: same message, response header and trailer; the service token, request id and timeout reach the service", async (t) => {
  const results = [];
  for (const [name, transport] of both(baseUrl)) {
    results.push(await call(transport, "fine"));
    t.deepEqual(seen, { authorization: `Bearer ${TOKEN}`, requestId: "req-1", contentType: "application/proto", timeout: "5000" }, name);
  }
  t.deepEqual(results[1], results[0]);
  t.like(results[1], { header: "header", trailer: "trailer" });
});

for (const token of ["unknown", "illegal", "overloaded"]) {
  test.serial(`a failed call (${token}): same code, message, metadata and gateway reply`, async (t) => {
    const [connect, lean] = both(baseUrl);
    const expected = await call(connect?.[1] as Transport, token);
    t.truthy((expected as { code?: Code }).code);
    t.deepEqual(await call(lean?.[1] as Transport, token), expected);
  });
}

test.serial("a call past its deadline is deadline_exceeded on both", async (t) => {
  for (const [name, transport] of both(baseUrl)) t.like(await call(transport, "slow", 50), { code: Code.DeadlineExceeded }, name);
});

test.serial("a service that is down is unavailable on both (the gateway answers 503 + Retry-After since issue 18; was 500)", async (t) => {
  for (const [name, transport] of both("http://127.0.0.1:9")) {
    t.like(
      await call(transport, "fine"),
      { code: Code.Unavailable, reply: { status: 503, body: { error: "service overloaded; retry after the Retry-After delay" } } },
      name,
    );
  }
});

test.serial("after the service restarts on its port, calls reconnect (one shared session, like Connect's)", async (t) => {
  const first = http2.createServer(connectNodeAdapter({ routes }));
  const own = new Set<http2.ServerHttp2Session>();
  first.on("session", (s) => own.add(s));
  await new Promise<void>((r) => first.listen(0, "127.0.0.1", r));
  const port = (first.address() as AddressInfo).port;
  const transports = both(`http://127.0.0.1:${port}`);
  for (const [name, transport] of transports) t.like(await call(transport, "fine"), { ok: { case: "applied" } }, name);
  for (const s of own) s.destroy();
  await new Promise((r) => first.close(r));
  const second = http2.createServer(connectNodeAdapter({ routes }));
  second.on("session", (s) => own.add(s));
  await new Promise<void>((r) => second.listen(port, "127.0.0.1", r));
  try {
    // A call racing the old session's teardown may fail (Connect's transport too); the one after it reconnects.
    for (const [name, transport] of transports) {
      const first = await call(transport, "fine");
      t.like("ok" in first ? first : await call(transport, "fine"), { ok: { case: "applied" } }, name);
    }
  } finally {
    for (const s of own) s.destroy();
    second.close();
  }
});

test("the installed connect-es is the version the lean transport's private imports were verified against", (t) => {
  for (const name of ["@connectrpc/connect", "@connectrpc/connect-node"]) {
    // The packages do not export ./package.json, so it is read from node_modules.
    const { version } = JSON.parse(readFileSync(new URL(`../../node_modules/${name}/package.json`, import.meta.url), "utf8")) as { version: string };
    t.is(
      version,
      CONNECT_ES_VERIFIED_VERSION,
      `${name} is ${version}: services/shared/rpc/unary-transport.ts imports helpers connect-es marks private (protocol-connect). ` +
        "Re-check them, the headers and the reset-code mapping as its CONNECT_ES_VERIFIED_VERSION comment lists, then raise that constant.",
    );
  }
});
