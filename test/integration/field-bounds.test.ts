/**
 * Bounds on every field from outside, on the real stack (gateway -> Connect -> PostgreSQL):
 * an over-long or NUL-holding value is a 400 / invalid_argument naming the field, never
 * `internal error`, and a 2 MB field is refused at the edge before it is decoded.
 */
import test from "ava";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { bearerToken, createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";
import { HeartService } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { DeliveryService } from "../../gen/proto/delivery/v1/delivery_pb.js";
import { AccessService } from "../../gen/proto/access/v1/access_pb.js";
import { startGatewayStack, type GatewayStack, type TestServer } from "./gateway-stack.js";

const TWO_MB = "x".repeat(2 * 1024 * 1024);
let stack: GatewayStack;
let server: TestServer;
let hearts: ReturnType<typeof createClient<typeof HeartService>>;
let delivery: ReturnType<typeof createClient<typeof DeliveryService>>;

test.before(async () => {
  stack = await startGatewayStack();
  server = await stack.createServer();
  const transport = createServiceTransport(stack.serviceUrl, TEST_SERVICE_TOKEN);
  hearts = createClient(HeartService, transport);
  delivery = createClient(DeliveryService, transport);
});
test.after.always(async () => {
  await stack?.close();
});

/** The ConnectError a call fails with (the test fails when it succeeds). */
async function rpcError(call: () => Promise<unknown>): Promise<ConnectError> {
  try {
    await call();
  } catch (error) {
    return ConnectError.from(error);
  }
  throw new Error("the call succeeded");
}

const heart = (extra: Partial<{ username: string; voterIdentity: string; ip: string; userAgent: string }> = {}) =>
  hearts.castHeart({ serverId: server.serverId, username: "Steve", voterIdentity: "acct-1", ip: "203.0.113.7", userAgent: "Mozilla/5.0", ...extra });

test("ingest: a NUL in token, referee_identity or server_event_id is a 400 naming the field (was 500 internal error)", async (t) => {
  const token = await stack.click(server.serverId);
  const base = { event: "registered", token, server_id: server.serverId, referee_identity: "p-1", server_event_id: "e-1" };
  for (const field of ["token", "referee_identity", "server_event_id"] as const) {
    const res = await stack.postSigned(server, { ...base, [field]: `a\u0000b` });
    t.is(res.status, 400, field);
    t.deepEqual(JSON.parse(res.text), { error: `${field} must not contain NUL characters` });
  }
  t.is((await stack.postSigned(server, base)).status, 200, "the same event without the NUL applies");
});

test("ingest: an over-long token is a 400 naming token; a 2 MB field is refused at the edge (413)", async (t) => {
  const base = { event: "registered", server_id: server.serverId, referee_identity: "p-2", server_event_id: "e-2" };
  const long = await stack.postSigned(server, { ...base, token: "t".repeat(257) });
  t.is(long.status, 400);
  t.deepEqual(JSON.parse(long.text), { error: "token must be at most 256 characters" });
  const huge = await stack.postSigned(server, { ...base, token: TWO_MB });
  t.is(huge.status, 413);
});

test("referral link: a NUL or over-long referrer is a 400 naming referrer; no click is stored", async (t) => {
  for (const [referrer, text] of [
    ["%00evil", "referrer must not contain NUL characters"],
    ["r".repeat(513), "referrer must be at most 512 characters"],
  ] as const) {
    const res = await fetch(`${stack.baseUrl}/r/${server.serverId}?referrer=${referrer}`, { redirect: "manual" });
    t.is(res.status, 400);
    t.deepEqual(await res.json(), { error: text });
  }
  t.is(await stack.db.prisma.referralClick.count({ where: { referrerIdentity: { startsWith: "r".repeat(100) } } }), 0);
});

test("RecordClick and ApplyEvent RPCs: a NUL is invalid_argument naming the field, never internal", async (t) => {
  const click = await rpcError(() => stack.clients.referral.recordClick({ serverId: server.serverId, referrerIdentity: "a\u0000" }));
  t.is(click.code, Code.InvalidArgument);
  t.is(click.rawMessage, "referrer_identity must not contain NUL characters");
  const apply = await rpcError(() =>
    stack.clients.referral.applyEvent({ serverId: server.serverId, event: 1, token: "tok\u0000", refereeIdentity: "p", serverEventId: "e" }),
  );
  t.is(apply.code, Code.InvalidArgument);
  t.is(apply.rawMessage, "token must not contain NUL characters");
});

test("CastHeart: over-long or NUL username, voter identity, user agent or ip are invalid_argument naming the field; nothing stored", async (t) => {
  const cases: Array<[Parameters<typeof heart>[0], string]> = [
    [{ username: "u".repeat(65) }, "username must be at most 64 characters"],
    [{ username: "St\u0000eve" }, "username must not contain NUL characters"],
    [{ voterIdentity: "v".repeat(3000) }, "voter_identity must be at most 512 characters"],
    [{ voterIdentity: "acct\u0000" }, "voter_identity must not contain NUL characters"],
    [{ userAgent: "Mozilla\u0000" }, "user_agent must not contain NUL characters"],
    [{ ip: "1".repeat(100) }, "ip must be at most 64 characters"],
  ];
  for (const [extra, text] of cases) {
    const error = await rpcError(() => heart(extra));
    t.is(error.code, Code.InvalidArgument, text);
    t.is(error.rawMessage, text);
  }
  t.is(await stack.db.prisma.heart.count({ where: { serverId: server.serverId } }), 0);
  const counted = await heart({ userAgent: `Mozilla/5.0 ${"u".repeat(5000)}` });
  t.true(counted.counted, "a long user agent is a signal: cut, not refused");
  const stored = await stack.db.prisma.heart.findUniqueOrThrow({ where: { id: counted.heartId } });
  t.is(stored.userAgent?.length, 1024);
});

test("CastHeart with a 2 MB username is refused at the edge (resource exhausted) over Connect and gRPC", async (t) => {
  const connect = await rpcError(() => heart({ username: TWO_MB }));
  t.is(connect.code, Code.ResourceExhausted);
  const grpc = createClient(HeartService, createGrpcTransport({ baseUrl: stack.serviceUrl, interceptors: [bearerToken(TEST_SERVICE_TOKEN)] }));
  const overGrpc = await rpcError(() => grpc.castHeart({ serverId: server.serverId, username: TWO_MB, voterIdentity: "a", ip: "203.0.113.9" }));
  t.is(overGrpc.code, Code.ResourceExhausted);
  t.is(await stack.db.prisma.heart.count({ where: { username: { startsWith: "xxxx" } } }), 0);
});

test("server admin and test callback: NUL or over-long name, kid and username are invalid_argument naming the field", async (t) => {
  const name = await rpcError(() => stack.clients.admin.createServer({ name: "srv\u0000" }));
  t.is(name.rawMessage, "name must not contain NUL characters");
  const kid = await rpcError(() => stack.clients.admin.revokeReferralSecret({ serverId: server.serverId, kid: "k\u0000" }));
  t.is(kid.code, Code.InvalidArgument);
  t.is(kid.rawMessage, "kid must not contain NUL characters");
  const username = await rpcError(() => delivery.sendTestCallback({ serverId: server.serverId, username: "u".repeat(65) }));
  t.is(username.code, Code.InvalidArgument);
  t.is(username.rawMessage, "username must be at most 64 characters");
  // The test callback is a stored delivery: a refused username stores nothing.
  t.is(await stack.db.prisma.delivery.count({ where: { serverId: server.serverId, eventType: "heart.test" } }), 0);
});

test("ListDeliveries player search: NUL or over-long username is invalid_argument naming the field, never a query", async (t) => {
  const long = await rpcError(() => delivery.listDeliveries({ serverId: server.serverId, username: "u".repeat(65) }));
  t.is(long.code, Code.InvalidArgument);
  t.is(long.rawMessage, "username must be at most 64 characters");
  const nul = await rpcError(() => delivery.listDeliveries({ serverId: server.serverId, username: "St\u0000eve" }));
  t.is(nul.code, Code.InvalidArgument);
  t.is(nul.rawMessage, "username must not contain NUL characters");
  t.deepEqual((await delivery.listDeliveries({ serverId: server.serverId, username: "u".repeat(64) })).deliveries, []);
});

test("SendTestVote and CreateOwner: a NUL or over-long username / display_name is invalid_argument naming the field (was sent, or 500)", async (t) => {
  for (const [username, text] of [
    ["St\u0000eve", "username must not contain NUL characters"],
    ["u".repeat(65), "username must be at most 64 characters"],
  ] as const) {
    // Refused before the Votifier settings are looked at: this server has none.
    const error = await rpcError(() => delivery.sendTestVote({ serverId: server.serverId, username }));
    t.is(error.code, Code.InvalidArgument, username);
    t.is(error.rawMessage, text);
  }
  const access = createClient(AccessService, createServiceTransport(stack.serviceUrl, TEST_SERVICE_TOKEN));
  const owner = await rpcError(() => access.createOwner({ ownerId: "acct-nul", displayName: "Ste\u0000ve" }));
  t.is(owner.code, Code.InvalidArgument);
  t.is(owner.rawMessage, "display_name must not contain NUL characters");
  const long = await rpcError(() => access.createOwner({ ownerId: "acct-long", displayName: "n".repeat(201) }));
  t.is(long.rawMessage, "display_name must be at most 200 characters");
  t.is(await stack.db.prisma.owner.count({ where: { id: { in: ["acct-nul", "acct-long"] } } }), 0);
});
