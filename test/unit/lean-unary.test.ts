/**
 * The referral service's lean unary path (services/referral-service/lean-unary.ts) on a stub service: the call deadline
 * as Connect's own handler keeps it, the router's options as the router applies them, and the guard on the private
 * connect-es helpers it imports. Each case is sent over raw HTTP/2 in binary (the lean path) and, where the answer is
 * compared, in JSON (Connect's own handler).
 */
import http2 from "node:http2";
import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import type { AddressInfo } from "node:net";
import test from "ava";
import { create, fromBinary, toBinary, toJson, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { type ApplyEventRequest, ApplyEventRequestSchema, ApplyEventResponseSchema, ReferralService } from "../../gen/proto/referral/v1/referral_pb.js";
import {
  createLeanUnaryAdapter,
  LEAN_UNARY_PRIVATE_HELPERS,
  LEAN_UNARY_VERIFIED_CONNECT_ES_VERSION,
  type LeanUnaryOptions,
} from "../../services/referral-service/lean-unary.js";

const APPLY_EVENT = "/referral.v1.ReferralService/ApplyEvent";

/** What the implementation saw of the last call (the tests run serially). */
const seen: { timeoutMs?: number; abortedWith?: unknown; path?: string } = {};

/**
 * `slow` runs until its signal aborts (then fails with the signal's reason, as an implementation that honours its
 * deadline does), or 5 s; any other token answers at once.
 */
const applyEvent = async (req: ApplyEventRequest, ctx: HandlerContext) => {
  seen.timeoutMs = ctx.timeoutMs();
  seen.abortedWith = undefined;
  ctx.signal.addEventListener("abort", () => (seen.abortedWith = ctx.signal.reason), { once: true });
  if (req.token === "slow") {
    await new Promise((resolve, reject) => {
      const cap = setTimeout(resolve, 5_000);
      ctx.signal.addEventListener("abort", () => {
        clearTimeout(cap);
        reject(ctx.signal.reason);
      });
    });
  }
  return create(ApplyEventResponseSchema, {
    outcome: { case: "applied", value: { referralId: `id-${req.token}`, advanced: true } },
  });
};

/** Stamps the answer with `x-via: <name>`, so a test sees which interceptors served a call. */
const via =
  (name: string): Interceptor =>
  (next) =>
  async (req) => {
    const res = await next(req);
    res.header.set("x-via", name);
    return res;
  };

async function startServer(options: Omit<LeanUnaryOptions, "leanMethods">) {
  const server = http2.createServer(createLeanUnaryAdapter({ ...options, leanMethods: [ReferralService.method.applyEvent] }));
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => sessions.add(s));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    close: () => {
      for (const s of sessions) s.destroy();
      server.close();
    },
  };
}

interface Answer {
  status: number;
  contentType: string | undefined;
  via: string | undefined;
  body: string;
}

/** One POST over a fresh HTTP/2 session: in binary (the lean path) or in JSON (Connect's handler). */
async function call<I extends DescMessage>(
  url: string,
  schema: I,
  init: MessageInitShape<I>,
  opts: { binary: boolean; headers?: Record<string, string> },
): Promise<Answer> {
  const message = create(schema, init);
  const body = opts.binary ? Buffer.from(toBinary(schema, message)) : Buffer.from(JSON.stringify(toJson(schema, message)));
  const session = http2.connect(url);
  try {
    return await new Promise<Answer>((resolve, reject) => {
      const stream = session.request({
        ":method": "POST",
        ":path": APPLY_EVENT,
        "content-type": opts.binary ? "application/proto" : "application/json",
        "connect-protocol-version": "1",
        "content-length": body.byteLength,
        ...opts.headers,
      });
      let head: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      stream.on("response", (h) => (head = h));
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () =>
        resolve({
          status: Number(head[":status"]),
          contentType: head["content-type"] as string | undefined,
          via: head["x-via"] as string | undefined,
          body: Buffer.concat(chunks).toString(opts.binary && head["content-type"] === "application/proto" ? "base64" : "utf8"),
        }),
      );
      stream.on("error", reject);
      stream.end(body);
    });
  } finally {
    session.close();
  }
}

const event = (token: string) => ({ serverId: "s", token, refereeIdentity: "r", serverEventId: "e" });

let stub: Awaited<ReturnType<typeof startServer>>;
test.before(async () => {
  stub = await startServer({
    routes: (router: ConnectRouter) => {
      router.service(ReferralService, { applyEvent });
    },
    interceptors: [via("router")],
    maxTimeoutMs: 60_000,
  });
});
test.after.always(() => stub?.close());

test.serial("a call whose deadline passes while its implementation runs is deadline_exceeded (504), and the implementation's signal aborts", async (t) => {
  const lean = await call(stub.url, ApplyEventRequestSchema, event("slow"), { binary: true, headers: { "connect-timeout-ms": "50" } });
  t.deepEqual(lean, {
    status: 504,
    contentType: "application/json",
    via: undefined,
    body: JSON.stringify({ code: "deadline_exceeded", message: "the operation timed out" }),
  });
  t.true(seen.abortedWith instanceof ConnectError && seen.abortedWith.code === Code.DeadlineExceeded, "the signal aborts with Connect's deadline error");
  t.true(seen.timeoutMs !== undefined && seen.timeoutMs > 0 && seen.timeoutMs <= 50, "timeoutMs() counts down from the header's value");
  const connect = await call(stub.url, ApplyEventRequestSchema, event("slow"), { binary: false, headers: { "connect-timeout-ms": "50" } });
  t.deepEqual(lean, connect, "the same answer as Connect's handler");
});

test.serial("a call without a deadline is answered, with no deadline in its context and a signal that stays unaborted", async (t) => {
  const lean = await call(stub.url, ApplyEventRequestSchema, event("fine"), { binary: true });
  t.like(lean, { status: 200, contentType: "application/proto", via: "router" });
  t.is(seen.timeoutMs, undefined);
  t.is(seen.abortedWith, undefined);
  const inTime = await call(stub.url, ApplyEventRequestSchema, event("fine"), { binary: true, headers: { "connect-timeout-ms": "5000" } });
  t.like(inTime, { status: 200, contentType: "application/proto" });
  t.is(seen.abortedWith, undefined, "a call answered within its deadline is not aborted by it");
});

for (const [value, message] of [
  ["soon", "protocol error: invalid connect timeout value: soon"],
  ["12345678901", "protocol error: invalid connect timeout value: 12345678901"],
  ["-5", "protocol error: invalid connect timeout value: -5"],
  ["70000", "timeout 70000ms must be <= 60000"],
] as const) {
  test.serial(`an invalid connect-timeout-ms (${value}) is refused invalid_argument (400) exactly as Connect's handler refuses it`, async (t) => {
    const lean = await call(stub.url, ApplyEventRequestSchema, event("fine"), { binary: true, headers: { "connect-timeout-ms": value } });
    t.deepEqual(lean, { status: 400, contentType: "application/json", via: undefined, body: JSON.stringify({ code: "invalid_argument", message }) });
    const connect = await call(stub.url, ApplyEventRequestSchema, event("fine"), { binary: false, headers: { "connect-timeout-ms": value } });
    t.deepEqual(lean, connect);
  });
}

test.serial(
  "a method registered through any of the router's calls (chained, rpc, with its own options) is served with those options, as by Connect",
  async (t) => {
    const other = await startServer({
      routes: (router: ConnectRouter) => {
        // Registered first on its own, then again (chained) with its own interceptors: the last registration wins.
        router.rpc(ReferralService.method.getReferral, async () => ({})).rpc(ReferralService.method.applyEvent, applyEvent, { interceptors: [via("method")] });
      },
      interceptors: [via("router")],
    });
    try {
      const lean = await call(other.url, ApplyEventRequestSchema, event("fine"), { binary: true });
      t.like(lean, { status: 200, contentType: "application/proto", via: "method" });
      // Connect's handler aborts the signal at the end of every call; the lean path does not: this call was the lean path's.
      t.is(seen.abortedWith, undefined, "served on the lean path");
      const connect = await call(other.url, ApplyEventRequestSchema, event("fine"), { binary: false });
      t.like(connect, { status: 200, via: "method" });
    } finally {
      other.close();
    }
  },
);

test.serial(
  "a caller that accepts a compression gets the lean answer compressed as Connect compresses it (connectNodeAdapter's default gzip, br; compressMinBytes)",
  async (t) => {
    const other = await startServer({
      routes: (router: ConnectRouter) => {
        router.service(ReferralService, { applyEvent });
      },
      compressMinBytes: 0,
    });
    try {
      const session = http2.connect(other.url);
      const body = Buffer.from(toBinary(ApplyEventRequestSchema, create(ApplyEventRequestSchema, event("fine"))));
      const answer = await new Promise<{ encoding: unknown; body: Buffer }>((resolve, reject) => {
        const stream = session.request({
          ":method": "POST",
          ":path": APPLY_EVENT,
          "content-type": "application/proto",
          "content-length": body.byteLength,
          "accept-encoding": "gzip",
        });
        let encoding: unknown;
        const chunks: Buffer[] = [];
        stream.on("response", (h) => (encoding = h["content-encoding"]));
        stream.on("data", (chunk: Buffer) => chunks.push(chunk));
        stream.on("end", () => resolve({ encoding, body: Buffer.concat(chunks) }));
        stream.on("error", reject);
        stream.end(body);
      });
      session.close();
      t.is(answer.encoding, "gzip");
      t.like(fromBinary(ApplyEventResponseSchema, gunzipSync(answer.body)), { outcome: { case: "applied", value: { referralId: "id-fine" } } });
      // Connect's handler aborts the signal at the end of every call; the lean path does not: this call was the lean path's.
      t.is(seen.abortedWith, undefined, "served on the lean path");
    } finally {
      other.close();
    }
  },
);

test("the installed connect-es is the version the lean path's private imports were verified against, and exports each of them", async (t) => {
  for (const name of ["@connectrpc/connect", "@connectrpc/connect-node"]) {
    // The packages do not export ./package.json, so it is read from node_modules.
    const { version } = JSON.parse(readFileSync(new URL(`../../node_modules/${name}/package.json`, import.meta.url), "utf8")) as { version: string };
    t.is(
      version,
      LEAN_UNARY_VERIFIED_CONNECT_ES_VERSION,
      `${name} is ${version}: services/referral-service/lean-unary.ts imports helpers connect-es marks private. ` +
        "Re-check them and Connect's unary handler as its LEAN_UNARY_VERIFIED_CONNECT_ES_VERSION comment lists, then raise that constant.",
    );
  }
  for (const [specifier, names] of Object.entries(LEAN_UNARY_PRIVATE_HELPERS)) {
    const module = (await import(specifier)) as Record<string, unknown>;
    for (const helper of names) t.not(module[helper], undefined, `${specifier} no longer exports ${helper}, which lean-unary.ts imports`);
  }
});
