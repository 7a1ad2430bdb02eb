/**
 * The referral service's lean path of the ingest RPCs (services/referral-service/lean-unary.ts): a Connect call in
 * binary to ApplyEvent, ResolveSigningKeys, CheckVote or ClaimVote is answered without Connect's handler, and must answer exactly as
 * Connect's handler does. Each case is sent twice over raw HTTP/2: in binary (the lean path) and in JSON (Connect's
 * own handler), and the answers - status, content type, error body, the decoded message - must be equal.
 */
import http2 from "node:http2";
import test from "ava";
import { create, fromBinary, fromJson, toBinary, toJson, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { ApplyEventRequestSchema, ApplyEventResponseSchema, ReferralEventType } from "../../gen/proto/referral/v1/referral_pb.js";
import { ResolveSigningKeysRequestSchema, ResolveSigningKeysResponseSchema, SigningKeyStatus } from "../../gen/proto/servers/v1/servers_pb.js";
import {
  CheckVoteRequestSchema,
  CheckVoteResponseSchema,
  ClaimStatus,
  ClaimVoteRequestSchema,
  ClaimVoteResponseSchema,
  PlayerIdKind,
} from "../../gen/proto/claims/v1/claims_pb.js";
import { ERROR_TEXT } from "../../services/shared/values/contract.js";
import { DASHBOARD_SESSION_HEADER, ERROR_KIND_HEADER, SESSION_EXPIRED_KIND } from "../../services/shared/values/wire.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { TEST_SERVICE_TOKEN } from "../../scripts/harness/service-token.js";

let stack: TestStack;
test.before(async () => {
  stack = await startStack({ gateway: false });
});
test.after.always(async () => {
  await stack?.close();
});

interface Answer {
  status: number;
  contentType: string | undefined;
  /** The error metadata header the service sets (services/shared/values/wire.ts). */
  errorKind: string | undefined;
  body: Buffer;
}

/** One POST over a fresh HTTP/2 session; `binary` picks application/proto (the lean path) or application/json (Connect's handler). */
async function call<I extends DescMessage>(
  path: string,
  schema: I,
  init: MessageInitShape<I>,
  opts: { binary: boolean; token?: string | null; headers?: Record<string, string> },
): Promise<Answer> {
  const message = create(schema, init);
  const body = opts.binary ? Buffer.from(toBinary(schema, message)) : Buffer.from(JSON.stringify(toJson(schema, message)));
  const session = http2.connect(stack.rpcUrl);
  try {
    return await new Promise<Answer>((resolve, reject) => {
      const headers: http2.OutgoingHttpHeaders = {
        ":method": "POST",
        ":path": path,
        "content-type": opts.binary ? "application/proto" : "application/json",
        "connect-protocol-version": "1",
        "content-length": body.byteLength,
        ...opts.headers,
      };
      const token = opts.token === undefined ? TEST_SERVICE_TOKEN : opts.token;
      if (token !== null) headers.authorization = `Bearer ${token}`;
      const stream = session.request(headers);
      let status = 0;
      let contentType: string | undefined;
      let errorKind: string | undefined;
      const chunks: Buffer[] = [];
      stream.on("response", (h) => {
        status = Number(h[":status"]);
        contentType = h["content-type"] as string | undefined;
        errorKind = h[ERROR_KIND_HEADER] as string | undefined;
      });
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => resolve({ status, contentType, errorKind, body: Buffer.concat(chunks) }));
      stream.on("error", reject);
      stream.end(body);
    });
  } finally {
    session.close();
  }
}

/** The decoded answer: the error's JSON body, or the message as JSON. */
function decoded<O extends DescMessage>(answer: Answer, schema: O): unknown {
  if (answer.contentType === "application/json" && answer.status !== 200) return JSON.parse(answer.body.toString("utf8"));
  if (answer.contentType === "application/proto") return toJson(schema, fromBinary(schema, answer.body));
  return toJson(schema, fromJson(schema, JSON.parse(answer.body.toString("utf8"))));
}

async function both<I extends DescMessage, O extends DescMessage>(
  path: string,
  input: I,
  output: O,
  init: MessageInitShape<I>,
  token?: string | null,
  headers?: Record<string, string>,
) {
  const opts = { ...(token === undefined ? {} : { token }), ...(headers ? { headers } : {}) };
  const lean = await call(path, input, init, { binary: true, ...opts });
  const connect = await call(path, input, init, { binary: false, ...opts });
  const view = (a: Answer) => ({ status: a.status, errorType: a.status === 200 ? undefined : a.contentType, errorKind: a.errorKind, body: decoded(a, output) });
  return { lean: view(lean), connect: view(connect) };
}

const APPLY_EVENT = "/referral.v1.ReferralService/ApplyEvent";
const RESOLVE_KEYS = "/servers.v1.ServerAdminService/ResolveSigningKeys";
const NO_SERVER = "00000000-0000-4000-8000-000000000000";

test("ApplyEvent in binary answers a domain error exactly as Connect's handler (404 not_found, the contract's text)", async (t) => {
  const event = { serverId: NO_SERVER, event: ReferralEventType.REGISTERED, token: "no-such-token", refereeIdentity: "player-1", serverEventId: "lean-1" };
  const { lean, connect } = await both(APPLY_EVENT, ApplyEventRequestSchema, ApplyEventResponseSchema, event);
  t.is(lean.status, 404);
  t.deepEqual(lean, connect);
  t.deepEqual(lean.body, { code: "not_found", message: ERROR_TEXT.unknownToken });
});

test("ApplyEvent in binary refuses a caller without a service token exactly as Connect's handler (401 unauthenticated)", async (t) => {
  const event = { serverId: NO_SERVER, event: ReferralEventType.REGISTERED, token: "t", refereeIdentity: "p", serverEventId: "lean-2" };
  const { lean, connect } = await both(APPLY_EVENT, ApplyEventRequestSchema, ApplyEventResponseSchema, event, null);
  t.is(lean.status, 401);
  t.deepEqual(lean, connect);
  const wrong = await both(APPLY_EVENT, ApplyEventRequestSchema, ApplyEventResponseSchema, event, "not-a-token");
  t.is(wrong.lean.status, 401);
  t.deepEqual(wrong.lean, wrong.connect);
});

test("ApplyEvent in binary sends an error's metadata as headers exactly as Connect's handler (an expired dashboard session)", async (t) => {
  const event = { serverId: NO_SERVER, event: ReferralEventType.REGISTERED, token: "t", refereeIdentity: "p", serverEventId: "lean-3" };
  const { lean, connect } = await both(APPLY_EVENT, ApplyEventRequestSchema, ApplyEventResponseSchema, event, undefined, {
    [DASHBOARD_SESSION_HEADER]: "no-such-session",
  });
  t.is(lean.status, 401);
  t.is(lean.errorKind, SESSION_EXPIRED_KIND);
  t.deepEqual(lean, connect);
});

test("ResolveSigningKeys in binary answers a message exactly as Connect's handler", async (t) => {
  const { lean, connect } = await both(RESOLVE_KEYS, ResolveSigningKeysRequestSchema, ResolveSigningKeysResponseSchema, { serverId: NO_SERVER });
  t.is(lean.status, 200);
  t.deepEqual(lean, connect);
  t.deepEqual(lean.body, toJson(ResolveSigningKeysResponseSchema, create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.UNKNOWN_SERVER })));
});

const CHECK_VOTE = "/claims.v1.ClaimService/CheckVote";
const CLAIM_VOTE = "/claims.v1.ClaimService/ClaimVote";

let seq = 0;
/** A server with a claim key, and a function that casts a counted heart for a steam id (returns its heart id). */
async function claimServer() {
  const { clients } = stack;
  const { server } = await clients.admin.createServer({ name: `Lean claims ${++seq}` });
  const serverId = server!.id;
  const { claimKey } = await clients.admin.rotateClaimKey({ serverId });
  const vote = async (steamId: string) => {
    const n = ++seq;
    const cast = await clients.hearts.castHeart({
      serverId,
      voterIdentity: `lean-voter-${n}`,
      username: "Steve",
      steamId,
      ip: `198.51.100.${n % 250}`,
      userAgent: "Mozilla/5.0 lean test",
    });
    if (!cast.counted) throw new Error("the test heart was not counted");
    return cast.heartId;
  };
  return { serverId, claimKey, vote };
}

const steam = (value: string) => ({ kind: PlayerIdKind.STEAM_ID, value });
/** The key with its last character changed: the right shape, no server. */
const wrong = (key: string) => `${key.slice(0, -1)}${key.endsWith("x") ? "y" : "x"}`;

test("CheckVote in binary answers 0, 1, a wrong key, a bad player id and a caller without a token exactly as Connect's handler", async (t) => {
  const { serverId, claimKey, vote } = await claimServer();
  const player = steam("76561198011111111");
  const none = await both(CHECK_VOTE, CheckVoteRequestSchema, CheckVoteResponseSchema, { claimKey, player });
  t.deepEqual(none.lean, none.connect);
  t.like(none.lean, { status: 200, body: { status: "CLAIM_STATUS_NOT_FOUND", keyValid: true, serverId } });

  const heartId = await vote(player.value);
  const held = await both(CHECK_VOTE, CheckVoteRequestSchema, CheckVoteResponseSchema, { claimKey, player });
  t.deepEqual(held.lean, held.connect);
  t.like(held.lean, { status: 200, body: { status: "CLAIM_STATUS_VOTED_UNCLAIMED", keyValid: true, serverId, heartId } });

  const wrongKey = await both(CHECK_VOTE, CheckVoteRequestSchema, CheckVoteResponseSchema, { claimKey: wrong(claimKey), player });
  t.deepEqual(wrongKey.lean, wrongKey.connect);
  t.deepEqual(wrongKey.lean.body, toJson(CheckVoteResponseSchema, create(CheckVoteResponseSchema, { status: ClaimStatus.NOT_FOUND, keyValid: false })));

  const badPlayer = await both(CHECK_VOTE, CheckVoteRequestSchema, CheckVoteResponseSchema, {
    claimKey,
    player: { kind: PlayerIdKind.UNSPECIFIED, value: "x" },
  });
  t.is(badPlayer.lean.status, 400);
  t.deepEqual(badPlayer.lean, badPlayer.connect);

  const noToken = await both(CHECK_VOTE, CheckVoteRequestSchema, CheckVoteResponseSchema, { claimKey, player }, null);
  t.is(noToken.lean.status, 401);
  t.deepEqual(noToken.lean, noToken.connect);
  t.false(JSON.stringify([wrongKey, badPlayer, noToken]).includes(claimKey.slice(4)), "the key is in no answer");
});

test("ClaimVote in binary refuses a caller without a service token, or with a wrong one, exactly as Connect's handler (401 unauthenticated)", async (t) => {
  const { claimKey } = await claimServer();
  const request = { claimKey, player: steam("76561198055555555") };
  for (const token of [null, "not-a-token"]) {
    const { lean, connect } = await both(CLAIM_VOTE, ClaimVoteRequestSchema, ClaimVoteResponseSchema, request, token);
    t.is(lean.status, 401);
    t.deepEqual(lean, connect);
  }
});

test("ClaimVote in binary answers 1 (claimed now), 2, 0 and a wrong key exactly as Connect's handler", async (t) => {
  const { serverId, claimKey, vote } = await claimServer();
  const none = await both(CLAIM_VOTE, ClaimVoteRequestSchema, ClaimVoteResponseSchema, { claimKey, player: steam("76561198022222222") });
  t.deepEqual(none.lean, none.connect);
  t.like(none.lean, { status: 200, body: { status: "CLAIM_STATUS_NOT_FOUND", keyValid: true, serverId } });

  // A claim takes its heart, so each path claims its own player's heart; the answers differ only in the heart and its times.
  const leanPlayer = steam("76561198033333333");
  const connectPlayer = steam("76561198044444444");
  const leanHeart = await vote(leanPlayer.value);
  const connectHeart = await vote(connectPlayer.value);
  const leanClaim = await call(CLAIM_VOTE, ClaimVoteRequestSchema, { claimKey, player: leanPlayer }, { binary: true });
  const connectClaim = await call(CLAIM_VOTE, ClaimVoteRequestSchema, { claimKey, player: connectPlayer }, { binary: false });
  const claimedNow = (a: Answer) => {
    const body = decoded(a, ClaimVoteResponseSchema) as Record<string, unknown>;
    return {
      status: a.status,
      contentType: a.contentType,
      fields: Object.keys(body).sort(),
      status_: body.status,
      keyValid: body.keyValid,
      serverId: body.serverId,
    };
  };
  t.deepEqual(claimedNow(leanClaim), { ...claimedNow(connectClaim), contentType: "application/proto" });
  t.like(decoded(leanClaim, ClaimVoteResponseSchema), { status: "CLAIM_STATUS_CLAIMED_NOW", heartId: leanHeart });
  t.like(decoded(connectClaim, ClaimVoteResponseSchema), { status: "CLAIM_STATUS_CLAIMED_NOW", heartId: connectHeart });

  // Claimed: both paths answer 2 with the same heart and times, for either player.
  for (const player of [leanPlayer, connectPlayer]) {
    const again = await both(CLAIM_VOTE, ClaimVoteRequestSchema, ClaimVoteResponseSchema, { claimKey, player });
    t.deepEqual(again.lean, again.connect);
    t.like(again.lean, { status: 200, body: { status: "CLAIM_STATUS_ALREADY_CLAIMED", keyValid: true, serverId } });
  }
  const againLean = await call(CLAIM_VOTE, ClaimVoteRequestSchema, { claimKey, player: leanPlayer }, { binary: true });
  const check = await call(CHECK_VOTE, CheckVoteRequestSchema, { claimKey, player: leanPlayer }, { binary: false });
  t.deepEqual(
    { ...(decoded(againLean, ClaimVoteResponseSchema) as object) },
    { ...(decoded(check, CheckVoteResponseSchema) as object) },
    "the claim's 2 reports the heart the check's 2 does",
  );

  const wrongKey = await both(CLAIM_VOTE, ClaimVoteRequestSchema, ClaimVoteResponseSchema, { claimKey: wrong(claimKey), player: leanPlayer });
  t.deepEqual(wrongKey.lean, wrongKey.connect);
  t.deepEqual(wrongKey.lean.body, toJson(ClaimVoteResponseSchema, create(ClaimVoteResponseSchema, { status: ClaimStatus.NOT_FOUND, keyValid: false })));
});
