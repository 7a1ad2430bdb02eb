/**
 * POST /api/referral/events against the real stack (gateway -> Connect -> referral
 * service -> PostgreSQL). One test per row of the contract's Errors table and per
 * ingest ruling; bodies are compared byte-exact with JSON.stringify of the expected object.
 */
import { connect } from "node:net";
import test from "ava";
import { createReferralServiceClients } from "../../gateway/clients.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { nowSeconds, startGatewayStack, type GatewayStack, type RawResponse, type TestServer } from "./gateway-stack.js";

let stack: GatewayStack;
let server: TestServer;

test.before(async () => {
  stack = await startGatewayStack();
  server = await stack.createServer();
});
test.after.always(async () => {
  await stack?.close();
});

const exact = (t: { is(a: unknown, b: unknown, m?: string): void }, res: RawResponse, status: number, body: unknown) => {
  t.is(res.status, status, res.text);
  t.is(res.text, JSON.stringify(body));
  t.is(res.headers.get("content-type"), "application/json");
};

let seq = 0;
const unique = (prefix: string) => `${prefix}-${++seq}-${Math.random().toString(36).slice(2, 8)}`;

/** A fresh click on `server` and a registered event body for it. */
async function registered(on: TestServer = server, overrides: Record<string, unknown> = {}) {
  const token = await stack.click(on.serverId, unique("referrer"));
  const referee = unique("referee");
  return { event: "registered", token, server_id: on.serverId, referee_identity: referee, server_event_id: `reg-${referee}`, ...overrides };
}

/** Rows written for one server (tests run concurrently, so each counting test uses a server of its own). */
async function counts(serverId: string) {
  const where = { serverId };
  const [events, referrals, credits] = await Promise.all([
    stack.db.prisma.referralEvent.count({ where }),
    stack.db.prisma.referral.count({ where }),
    stack.db.prisma.referralCredit.count({ where }),
  ]);
  return { events, referrals, credits };
}

// ---- Errors table, row by row ----

test("event outside registered|qualified|reversed -> 400 `event must be one of registered|qualified|reversed`", async (t) => {
  exact(t, await stack.postSigned(server, await registered(server, { event: "clicked" })), 400, {
    error: "event must be one of registered|qualified|reversed",
  });
});

test("registered without referee_identity -> 400 `referee_identity is required for a registered event`", async (t) => {
  exact(t, await stack.postSigned(server, await registered(server, { referee_identity: "" })), 400, {
    error: "referee_identity is required for a registered event",
  });
});

test("missing X-Service-Signature -> 400 `missing or malformed X-Service-Signature header`", async (t) => {
  exact(t, await stack.postRaw(JSON.stringify(await registered())), 400, { error: "missing or malformed X-Service-Signature header" });
});

test("malformed X-Service-Signature (every form the ruling lists) -> 400", async (t) => {
  const raw = JSON.stringify(await registered());
  const good = formatIngestSignature(server.secret, nowSeconds(), raw);
  const hex = good.split("sha256=")[1] ?? "";
  const headers = [
    good.replace(/^t=\d+,/, ""), // no t
    good.replace(/^t=\d+/, "t=soon"), // non-integer t
    good.replace(/^t=\d+/, `t=${nowSeconds()}.5`), // fractional t
    `t=${nowSeconds()}`, // no v1
    good.replace("v1=sha256=", "v1="), // no sha256= prefix
    good.replace(hex, hex.slice(2)), // wrong length
    good.replace(hex, `zz${hex.slice(2)}`), // non-hex
    good.replace(hex, hex.toUpperCase()), // upper-case hex
  ];
  for (const header of headers) {
    exact(t, await stack.postRaw(raw, { "x-service-signature": header }), 400, { error: "missing or malformed X-Service-Signature header" });
  }
});

test("body not valid JSON -> 400 `body is not valid JSON`", async (t) => {
  exact(t, await stack.postSigned(server, '{"event":"registered",'), 400, { error: "body is not valid JSON" });
});

test("a JSON body that is not an object (array, null, number) -> 400 `body is not valid JSON`", async (t) => {
  for (const raw of [`[${JSON.stringify(await registered())}]`, "null", "42", '"text"']) {
    exact(t, await stack.postSigned(server, raw), 400, { error: "body is not valid JSON" });
  }
});

test("invalid UTF-8 -> 400 `body is not valid JSON`", async (t) => {
  const bytes = Buffer.concat([Buffer.from(`{"server_id":"${server.serverId}","x":"`), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
  const header = formatIngestSignature(server.secret, nowSeconds(), bytes);
  exact(t, await stack.postRaw(bytes, { "x-service-signature": header }), 400, { error: "body is not valid JSON" });
});

test("any other missing or empty field -> 400 naming the field", async (t) => {
  exact(t, await stack.postSigned(server, await registered(server, { token: "   " })), 400, { error: "token is required" });
  exact(t, await stack.postSigned(server, await registered(server, { server_event_id: "" })), 400, { error: "server_event_id is required" });
  const { server_event_id: _dropped, ...noEventId } = await registered();
  exact(t, await stack.postSigned(server, noEventId), 400, { error: "server_event_id is required" });
});

test("a field of the wrong JSON type -> 400 naming the field", async (t) => {
  exact(t, await stack.postSigned(server, await registered(server, { ts: "1767225600" })), 400, { error: "ts must be an integer (unix seconds)" });
  exact(t, await stack.postSigned(server, await registered(server, { test: "yes" })), 400, { error: "test must be a boolean" });
  exact(t, await stack.postSigned(server, await registered(server, { token: 7 })), 400, { error: "token must be a string" });
  exact(t, await stack.postSigned(server, await registered(server, { referee_identity: ["a"] })), 400, { error: "referee_identity must be a string" });
});

test("MAC mismatch -> 401 `signature rejected: bad_signature`", async (t) => {
  exact(t, await stack.postSigned({ secret: "rsec_not_the_secret" }, await registered()), 401, { error: "signature rejected: bad_signature" });
});

test("t outside ±5 minutes -> 401 `signature rejected: stale`", async (t) => {
  exact(t, await stack.postSigned(server, await registered(), { t: nowSeconds() - 301 }), 401, { error: "signature rejected: stale" });
  exact(t, await stack.postSigned(server, await registered(), { t: nowSeconds() + 330 }), 401, { error: "signature rejected: stale" });
});

test("no configuration for server_id -> 404 `unknown server`", async (t) => {
  const body = await registered(server, { server_id: "5b0f8c4e-2d1a-4e3b-9c7d-6a5f4e3d2c1b" });
  exact(t, await stack.postSigned(server, body), 404, { error: "unknown server" });
});

test("referrals disabled -> 404 `referrals not enabled for this server`", async (t) => {
  const disabled = await stack.createServer();
  const body = await registered(disabled);
  await stack.clients.admin.setReferralsEnabled({ serverId: disabled.serverId, enabled: false });
  exact(t, await stack.postSigned(disabled, body), 404, { error: "referrals not enabled for this server" });
});

test("referrals enabled but no active secret -> 404 `referrals not enabled for this server`", async (t) => {
  const bare = await stack.createServer({ secret: false });
  const body = { event: "registered", token: "t", server_id: bare.serverId, referee_identity: "p", server_event_id: "e" };
  exact(t, await stack.postSigned({ secret: "rsec_anything" }, body), 404, { error: "referrals not enabled for this server" });
});

test("token without a click record for this server -> 404 `unknown referral token for this server`", async (t) => {
  exact(t, await stack.postSigned(server, await registered(server, { token: "no-such-token" })), 404, {
    error: "unknown referral token for this server",
  });
});

test("another server's token -> 404 `unknown referral token for this server`", async (t) => {
  const other = await stack.createServer();
  const foreignToken = await stack.click(other.serverId);
  exact(t, await stack.postSigned(server, await registered(server, { token: foreignToken })), 404, {
    error: "unknown referral token for this server",
  });
});

test("qualified before registered -> 422 `invalid state transition` with from: clicked, event: qualified", async (t) => {
  const token = await stack.click(server.serverId);
  const res = await stack.postSigned(server, { event: "qualified", token, server_id: server.serverId, server_event_id: unique("q") });
  exact(t, res, 422, { error: "invalid state transition", from: "clicked", event: "qualified" });
});

test("referral service unreachable during ApplyEvent -> 503 + Retry-After (issue 18), logged with the request id", async (t) => {
  const broken = await startGatewayStack({
    gatewayOverrides: () => {
      const { referral } = createDeadClients();
      return { referral };
    },
  });
  try {
    const s = await broken.createServer();
    const token = await broken.click(s.serverId);
    const res = await broken.postSigned(
      s,
      { event: "registered", token, server_id: s.serverId, referee_identity: "p", server_event_id: "e" },
      {
        headers: { "x-request-id": "req-500-test" },
      },
    );
    exact(t, res, 503, { error: "service overloaded; retry after the Retry-After delay" });
    t.is(res.headers.get("retry-after"), "5");
    const line = broken.gatewayLog.lines.find((l) => l.requestId === "req-500-test");
    t.is(line?.level, 40, "logged at warn level: the request is refused for a dependency, not failed");
    t.truthy(line?.err, "the cause is logged");
  } finally {
    await broken.close();
  }
});

test("referral service unreachable for the key lookup -> 503 + Retry-After (issue 18)", async (t) => {
  const broken = await startGatewayStack({ gatewayOverrides: () => createDeadClients() });
  try {
    const body = { event: "registered", token: "t", server_id: "5b0f8c4e-2d1a-4e3b-9c7d-6a5f4e3d2c1b", referee_identity: "p", server_event_id: "e" };
    exact(t, await broken.postSigned({ secret: "rsec_x" }, body), 503, { error: "service overloaded; retry after the Retry-After delay" });
  } finally {
    await broken.close();
  }
});

// ---- Ingest: the contract's order of checks ----

test("413 over 64 KiB before the signature is looked at", async (t) => {
  const big = JSON.stringify({ ...(await registered()), padding: "x".repeat(65_536) });
  exact(t, await stack.postRaw(big), 413, { error: "body too large" });
  exact(t, await stack.postRaw(big, { "x-service-signature": "garbage" }), 413, { error: "body too large" });
});

test("a body of exactly 64 KiB is read (not 413)", async (t) => {
  const body = await registered();
  const base = JSON.stringify({ ...body, padding: "" });
  const padded = JSON.stringify({ ...body, padding: "x".repeat(65_536 - Buffer.byteLength(base)) });
  t.is(Buffer.byteLength(padded), 65_536);
  const res = await stack.postSigned(server, padded);
  t.is(res.status, 200, res.text);
});

test("413 on a declared Content-Length over 64 KiB, answered before the body is sent", async (t) => {
  const { head, body } = await rawExchange(
    [`POST /api/referral/events HTTP/1.1`, `Host: x`, `Content-Type: application/json`, `Content-Length: 70000`, "", ""].join("\r\n"),
    undefined,
  );
  t.regex(head, /^HTTP\/1\.1 413 /);
  t.regex(head, /\r\nconnection: close\r\n/i);
  t.is(body, JSON.stringify({ error: "body too large" }));
});

test("413 for a chunked body that grows past 64 KiB, and the connection is closed", async (t) => {
  const chunk = "x".repeat(16_384);
  const chunks = Array.from({ length: 5 }, () => `${chunk.length.toString(16)}\r\n${chunk}\r\n`).join("");
  const { head, body, closed } = await rawExchange(
    [`POST /api/referral/events HTTP/1.1`, `Host: x`, `Transfer-Encoding: chunked`, "", ""].join("\r\n"),
    chunks,
  );
  t.regex(head, /^HTTP\/1\.1 413 /);
  t.is(body, JSON.stringify({ error: "body too large" }));
  t.true(closed);
});

test("malformed header beats invalid JSON", async (t) => {
  exact(t, await stack.postRaw("{not json", { "x-service-signature": "t=1" }), 400, { error: "missing or malformed X-Service-Signature header" });
});

test("invalid JSON beats unknown server", async (t) => {
  const raw = '{"server_id":"5b0f8c4e-2d1a-4e3b-9c7d-6a5f4e3d2c1b","event":';
  exact(t, await stack.postSigned(server, raw), 400, { error: "body is not valid JSON" });
});

test("server_id is the only field read before the MAC: missing server_id beats a bad MAC and a bad event", async (t) => {
  exact(t, await stack.postSigned({ secret: "rsec_wrong" }, { event: "bogus", token: "t" }), 400, { error: "server_id is required" });
  exact(t, await stack.postSigned({ secret: "rsec_wrong" }, { event: "bogus", server_id: 12 }), 400, { error: "server_id must be a string" });
});

test("unknown server beats bad MAC", async (t) => {
  const body = await registered(server, { server_id: "5b0f8c4e-2d1a-4e3b-9c7d-6a5f4e3d2c1b" });
  exact(t, await stack.postSigned({ secret: "rsec_wrong" }, body), 404, { error: "unknown server" });
});

test("referrals disabled beats bad MAC", async (t) => {
  const off = await stack.createServer({ referrals: false });
  const body = { event: "registered", token: "t", server_id: off.serverId, referee_identity: "p", server_event_id: "e" };
  exact(t, await stack.postSigned({ secret: "rsec_wrong" }, body), 404, { error: "referrals not enabled for this server" });
});

test("stale timestamp with a wrong MAC -> bad_signature", async (t) => {
  exact(t, await stack.postSigned({ secret: "rsec_wrong" }, await registered(), { t: nowSeconds() - 3_600 }), 401, {
    error: "signature rejected: bad_signature",
  });
});

test("bad MAC beats invalid fields", async (t) => {
  exact(t, await stack.postSigned({ secret: "rsec_wrong" }, await registered(server, { event: "bogus" })), 401, {
    error: "signature rejected: bad_signature",
  });
});

test("stale beats invalid fields", async (t) => {
  exact(t, await stack.postSigned(server, await registered(server, { event: "bogus" }), { t: nowSeconds() - 301 }), 401, {
    error: "signature rejected: stale",
  });
});

test("unknown kid -> bad_signature", async (t) => {
  exact(t, await stack.postSigned(server, await registered(), { kid: "k_unknown" }), 401, { error: "signature rejected: bad_signature" });
});

test("the right kid verifies", async (t) => {
  t.is((await stack.postSigned(server, await registered(), { kid: server.kid })).status, 200);
});

test("re-serialised body fails verification", async (t) => {
  const signedText = JSON.stringify(await registered(), null, 2);
  const header = formatIngestSignature(server.secret, nowSeconds(), signedText);
  const sentText = JSON.stringify(JSON.parse(signedText));
  exact(t, await stack.postRaw(sentText, { "x-service-signature": header }), 401, { error: "signature rejected: bad_signature" });
  t.is((await stack.postRaw(signedText, { "x-service-signature": header })).status, 200, "the exact signed bytes verify");
});

test("a unicode body verifies over its exact UTF-8 bytes", async (t) => {
  const body = await registered(server, { referee_identity: `Zoë_Ångström_🐉_${unique("u")}` });
  const res = await stack.postSigned(server, body);
  t.is(res.status, 200, res.text);
});

test("two active secrets during rotation both verify", async (t) => {
  const rotating = await stack.createServer();
  const rotated = await stack.clients.admin.rotateReferralSecret({ serverId: rotating.serverId, graceSeconds: 3_600n });
  const newer = { secret: rotated.secret };
  t.is((await stack.postSigned(rotating, await registered(rotating))).status, 200, "the old secret, without kid");
  t.is((await stack.postSigned(newer, await registered(rotating))).status, 200, "the new secret, without kid");
  t.is((await stack.postSigned(rotating, await registered(rotating), { kid: rotating.kid })).status, 200, "the old secret by kid");
  t.is((await stack.postSigned(newer, await registered(rotating), { kid: rotated.info?.kid })).status, 200, "the new secret by kid");
  const crossed = await stack.postSigned(rotating, await registered(rotating), { kid: rotated.info?.kid });
  exact(t, crossed, 401, { error: "signature rejected: bad_signature" });
});

test("revoked secret -> bad_signature", async (t) => {
  const revoking = await stack.createServer();
  const rotated = await stack.clients.admin.rotateReferralSecret({ serverId: revoking.serverId, graceSeconds: 3_600n });
  await stack.clients.admin.revokeReferralSecret({ serverId: revoking.serverId, kid: revoking.kid });
  exact(t, await stack.postSigned(revoking, await registered(revoking)), 401, { error: "signature rejected: bad_signature" });
  t.is((await stack.postSigned({ secret: rotated.secret }, await registered(revoking))).status, 200);
});

test("test:true with an unknown token -> 200 test, and nothing is written", async (t) => {
  const own = await stack.createServer();
  exact(t, await stack.postSigned(own, await registered(own, { token: "no-such-token", test: true })), 200, { ok: true, test: true });
  exact(t, await stack.postSigned(own, await registered(own, { test: true })), 200, { ok: true, test: true });
  t.deepEqual(await counts(own.serverId), { events: 0, referrals: 0, credits: 0 });
  t.is((await stack.postSigned(own, await registered(own))).status, 200, "the same kind of event without test is written");
  t.deepEqual(await counts(own.serverId), { events: 1, referrals: 1, credits: 0 });
});

test("test:true is verified and validated first: a bad MAC -> 401, a missing field -> 400", async (t) => {
  exact(t, await stack.postSigned({ secret: "rsec_wrong" }, await registered(server, { test: true })), 401, {
    error: "signature rejected: bad_signature",
  });
  exact(t, await stack.postSigned(server, await registered(server, { test: true, referee_identity: " " })), 400, {
    error: "referee_identity is required for a registered event",
  });
});

// ---- 200 outcomes ----

test("registered -> 200 {ok, referral_id, state: registered}; its exact replay -> 200 {ok, duplicate: true}", async (t) => {
  const body = await registered();
  const first = await stack.postSigned(server, body);
  const parsed = JSON.parse(first.text) as { referral_id: string };
  exact(t, first, 200, { ok: true, referral_id: parsed.referral_id, state: "registered" });
  t.regex(parsed.referral_id, /^[0-9a-f-]{36}$/);
  exact(t, await stack.postSigned(server, body), 200, { ok: true, duplicate: true });
});

test("registered then qualified then reversed -> states qualified and reversed with the same referral_id", async (t) => {
  const body = await registered();
  const { referral_id } = JSON.parse((await stack.postSigned(server, body)).text) as { referral_id: string };
  const later = { token: body.token, server_id: server.serverId };
  exact(t, await stack.postSigned(server, { ...later, event: "qualified", server_event_id: unique("q") }), 200, {
    ok: true,
    referral_id,
    state: "qualified",
  });
  exact(t, await stack.postSigned(server, { ...later, event: "reversed", server_event_id: unique("r") }), 200, {
    ok: true,
    referral_id,
    state: "reversed",
  });
  exact(t, await stack.postSigned(server, { ...later, event: "qualified", server_event_id: unique("q") }), 422, {
    error: "invalid state transition",
    from: "reversed",
    event: "qualified",
  });
});

test("a different referrer registering an anchored referee -> 200 {ok, ignored: first_touch_conflict}", async (t) => {
  const first = await registered();
  t.is((await stack.postSigned(server, first)).status, 200);
  const rivalToken = await stack.click(server.serverId, unique("rival"));
  const rival = { ...first, token: rivalToken, server_event_id: unique("reg") };
  exact(t, await stack.postSigned(server, rival), 200, { ok: true, ignored: "first_touch_conflict" });
});

test("strings are trimmed before forwarding: a padded replay of the same event is a duplicate", async (t) => {
  const body = await registered();
  t.is((await stack.postSigned(server, body)).status, 200);
  const padded = { ...body, token: ` ${body.token} `, server_event_id: `\t${body.server_event_id}\n` };
  exact(t, await stack.postSigned(server, padded), 200, { ok: true, duplicate: true });
});

test("unknown extra fields are accepted", async (t) => {
  t.is((await stack.postSigned(server, await registered(server, { extra: { nested: [1, 2] }, another: null }))).status, 200);
});

test("a Content-Type other than application/json is accepted (the MAC covers the bytes)", async (t) => {
  const res = await stack.postSigned(server, await registered(), { headers: { "content-type": "text/plain" } });
  t.is(res.status, 200, res.text);
});

test("only POST is allowed: other methods -> 405 with Allow: POST", async (t) => {
  for (const method of ["GET", "PUT", "DELETE"]) {
    const res = await fetch(`${stack.baseUrl}/api/referral/events`, { method });
    t.is(res.status, 405);
    t.is(res.headers.get("allow"), "POST");
    t.is(await res.text(), JSON.stringify({ error: "method not allowed" }));
  }
});

// ---- helpers ----

function createDeadClients() {
  // Port 9 (discard) on loopback has no listener in the test environment: every call fails as Unavailable.
  return createReferralServiceClients("http://127.0.0.1:9", TEST_SERVICE_TOKEN);
}

/** Sends raw bytes over one TCP connection and reads the answer until the server closes or answers fully. */
function rawExchange(head: string, body: string | undefined): Promise<{ head: string; body: string; closed: boolean }> {
  const url = new URL(stack.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let received = "";
    let closed = false;
    const finish = () => {
      const at = received.indexOf("\r\n\r\n");
      resolve({ head: at === -1 ? received : received.slice(0, at + 2), body: at === -1 ? "" : received.slice(at + 4), closed });
    };
    socket.setEncoding("utf8");
    socket.on("data", (d: string) => (received += d));
    // Failure policy: an EPIPE/ECONNRESET while we are still writing is the server closing on us; read what arrived.
    socket.on("error", () => undefined);
    socket.on("close", () => {
      closed = true;
      finish();
    });
    socket.setTimeout(5_000, () => {
      socket.destroy();
      reject(new Error(`no close within 5 s; received: ${received.slice(0, 200)}`));
    });
    socket.write(head);
    if (body !== undefined) socket.write(body);
  });
}
