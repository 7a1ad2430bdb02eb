import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type {
  ClaimPullEventsRequestSchema,
  ClaimPullEventsResponse,
  ListPullEventsRequestSchema,
  ListPullEventsResponse,
  ClaimPullHeartsRequestSchema,
  ClaimPullHeartsResponse,
  ListPullHeartsRequestSchema,
  ListPullHeartsResponse,
} from "../gen/proto/delivery/v1/delivery_pb.js";
import { PullKeyStatus, type ResolvePullKeysRequestSchema, type ResolvePullKeysResponse } from "../gen/proto/servers/v1/servers_pb.js";
import {
  keysOf,
  readCachedKeys,
  verifySignedRequest,
  type KeyPurpose,
  type LookupGuards,
  type SignedInput,
  type SignedRequestKeys,
  type SignedResult,
} from "./signed-request.js";
import type { CachedKeyAnswer, KeyAnswer, KeyAnswerKind } from "./signing-key-cache.js";
import { errorReply, fromRpcError } from "./http-errors.js";
import type { JsonObject } from "./validate-event.js";
import { MAX_PULL_CLAIM, MAX_PULL_PAGE } from "../services/shared/values/wire.js";
import { integerBetweenText, notStringText } from "../services/shared/values/contract.js";
import { PULL_CLAIM_STATUS_NAMES } from "../services/shared/values/proto-names.js";

/** Lists a server's unclaimed counted hearts (signed POST). */
export const PULL_HEARTS_PATH = "/api/pull/hearts";
/** Claims hearts by heart_id (signed POST). */
export const PULL_CLAIMS_PATH = "/api/pull/claims";
/** Lists a server's unclaimed referral events, for a server opted in to them (signed POST). */
export const PULL_EVENTS_PATH = "/api/pull/events";
/** Claims referral events by event_id (signed POST). */
export const PULL_EVENT_CLAIMS_PATH = "/api/pull/events/claims";

/** The referral-service RPCs the pull API calls; they throw ConnectError. */
export interface PullRpcs {
  resolvePullKeys(request: MessageInitShape<typeof ResolvePullKeysRequestSchema>): Promise<ResolvePullKeysResponse>;
  listPullHearts(request: MessageInitShape<typeof ListPullHeartsRequestSchema>): Promise<ListPullHeartsResponse>;
  claimPullHearts(request: MessageInitShape<typeof ClaimPullHeartsRequestSchema>): Promise<ClaimPullHeartsResponse>;
  listPullEvents(request: MessageInitShape<typeof ListPullEventsRequestSchema>): Promise<ListPullEventsResponse>;
  claimPullEvents(request: MessageInitShape<typeof ClaimPullEventsRequestSchema>): Promise<ClaimPullEventsResponse>;
  /** After a MAC failed: the answer of a pull key lookup started at or after `since` (ms), bounded per server (gateway/signing-key-cache.ts#refresh). */
  refreshPullKeys?(serverId: string, since: number): Promise<ResolvePullKeysResponse> | undefined;
  /** The pull key cache's answer without a lookup (gateway/signing-key-cache.ts#peek). */
  peekPullKeys?(serverId: string): CachedKeyAnswer<ResolvePullKeysResponse> | undefined;
}

/** The pull keys' classification for the key cache (ResolvePullKeys's statuses). */
export function classifyPullKeys(answer: KeyAnswer): KeyAnswerKind {
  if (answer.status === PullKeyStatus.OK) return "ok";
  return answer.status === PullKeyStatus.UNKNOWN_SERVER ? "unknown_server" : "other";
}

/** Where a pull request's keys come from: the RPC (through the gateway's pull key cache when wired), the cache's peek, the guards. */
function pullKeys(rpcs: PullRpcs, guards: LookupGuards): SignedRequestKeys {
  const peek = rpcs.peekPullKeys;
  const cached = peek ? (serverId: string) => readCachedKeys(peek(serverId), classifyPullKeys) : undefined;
  return keysOf(pullSecrets(rpcs), { ...guards, cached });
}

/**
 * POST /api/pull/hearts, for servers that cannot accept connections: the same
 * signature scheme and order of checks as the ingest endpoint (the server's pull
 * secret instead of its referral secret), then `cursor` (optional string) and
 * `limit` (optional integer 1-500, default 100). Answers
 * `{"hearts":[{heart_id, username, period, counted_at, streak_day?, next_eligible_at?, steam_id?, discord_id?,
 * minecraft_uuid?, account_id?}], "next_cursor"}` (each `?` field only when known).
 */
export async function handlePullList(input: SignedInput, rpcs: PullRpcs, now: () => Date, guards: LookupGuards = {}): Promise<SignedResult> {
  const signed = await verifySignedRequest(input, pullKeys(rpcs, guards), now);
  if (signed.kind === "rejected") return signed.result;
  const { body, serverId, kid } = signed;
  const fields = readListFields(body);
  if (fields.kind === "invalid") return { reply: errorReply("invalidField", fields.error), outcome: "invalid_field", serverId, kid };
  try {
    const page = await rpcs.listPullHearts({ serverId, cursor: fields.cursor, limit: fields.limit });
    const hearts = page.hearts.map((h) => ({
      heart_id: h.heartId,
      username: h.username,
      period: h.period,
      counted_at: h.countedAt ? timestampDate(h.countedAt).toISOString() : null,
      ...(h.streakDay > 0 ? { streak_day: h.streakDay } : {}),
      ...(h.nextEligibleAt ? { next_eligible_at: timestampDate(h.nextEligibleAt).toISOString() } : {}),
      ...(h.steamId ? { steam_id: h.steamId } : {}),
      ...(h.discordId ? { discord_id: h.discordId } : {}),
      ...(h.minecraftUuid ? { minecraft_uuid: h.minecraftUuid } : {}),
      ...(h.accountId ? { account_id: h.accountId } : {}),
    }));
    return { reply: { status: 200, body: { hearts, next_cursor: page.nextCursor === "" ? null : page.nextCursor } }, outcome: "listed", serverId, kid };
  } catch (error) {
    return { ...rpcFailure(error), serverId, kid };
  }
}

/**
 * POST /api/pull/claims: claims hearts by `heart_ids` (1-500 strings), idempotently.
 * Answers `{"results":[{heart_id, status}]}`, one per id in request order, with
 * status `claimed`, `already_claimed` (a retried claim) or `unknown`.
 */
export async function handlePullClaim(input: SignedInput, rpcs: PullRpcs, now: () => Date, guards: LookupGuards = {}): Promise<SignedResult> {
  const signed = await verifySignedRequest(input, pullKeys(rpcs, guards), now);
  if (signed.kind === "rejected") return signed.result;
  const { body, serverId, kid } = signed;
  const ids = readClaimIds(body, "heart_ids");
  if (typeof ids === "string") return { reply: errorReply("invalidField", ids), outcome: "invalid_field", serverId, kid };
  try {
    const { results } = await rpcs.claimPullHearts({ serverId, heartIds: ids });
    const body = { results: results.map((r) => ({ heart_id: r.heartId, status: PULL_CLAIM_STATUS_NAMES[r.status] ?? "unknown" })) };
    return { reply: { status: 200, body }, outcome: "claimed", serverId, kid };
  } catch (error) {
    return { ...rpcFailure(error), serverId, kid };
  }
}

/**
 * POST /api/pull/events: the referral events (`referral.registered|qualified|reversed`) and closed periods
 * (`period.closed`) of a server whose pull API is opted in to them (SetPullEventTypes), checked and paged exactly like
 * the hearts list. Answers `{"events":[{event, event_id, server_id, referral_id, referrer_identity,
 * referee_identity, state, previous_state, reason?, reason_text?, occurred_at}], "next_cursor"}` (a period.closed:
 * `{event, event_id, server_id, kind, period, starts_at, ends_at, standings, occurred_at}`): the callback body's fields
 * (docs/callbacks.md) with `occurred_at` instead of the per-attempt `timestamp`.
 */
export async function handlePullEventList(input: SignedInput, rpcs: PullRpcs, now: () => Date, guards: LookupGuards = {}): Promise<SignedResult> {
  const signed = await verifySignedRequest(input, pullKeys(rpcs, guards), now);
  if (signed.kind === "rejected") return signed.result;
  const { body, serverId, kid } = signed;
  const fields = readListFields(body);
  if (fields.kind === "invalid") return { reply: errorReply("invalidField", fields.error), outcome: "invalid_field", serverId, kid };
  try {
    const page = await rpcs.listPullEvents({ serverId, cursor: fields.cursor, limit: fields.limit });
    const events = page.events.map((e) =>
      e.bodyJson !== ""
        ? // An event that is not a referral (period.closed): the callback body's fields as the service sent them.
          { ...(JSON.parse(e.bodyJson) as Record<string, unknown>), occurred_at: e.occurredAt ? timestampDate(e.occurredAt).toISOString() : null }
        : {
            event: e.event,
            event_id: e.eventId,
            server_id: serverId,
            referral_id: e.referralId,
            referrer_identity: e.referrerIdentity,
            referee_identity: e.refereeIdentity,
            state: e.state,
            previous_state: e.previousState,
            ...(e.reason !== "" ? { reason: e.reason } : {}),
            ...(e.reasonText !== "" ? { reason_text: e.reasonText } : {}),
            occurred_at: e.occurredAt ? timestampDate(e.occurredAt).toISOString() : null,
          },
    );
    return { reply: { status: 200, body: { events, next_cursor: page.nextCursor === "" ? null : page.nextCursor } }, outcome: "listed", serverId, kid };
  } catch (error) {
    return { ...rpcFailure(error), serverId, kid };
  }
}

/**
 * POST /api/pull/events/claims: claims referral events by `event_ids` (1-500 strings), idempotently,
 * like the heart claim. Answers `{"results":[{event_id, status}]}` (`claimed`, `already_claimed`, `unknown`).
 */
export async function handlePullEventClaim(input: SignedInput, rpcs: PullRpcs, now: () => Date, guards: LookupGuards = {}): Promise<SignedResult> {
  const signed = await verifySignedRequest(input, pullKeys(rpcs, guards), now);
  if (signed.kind === "rejected") return signed.result;
  const { body, serverId, kid } = signed;
  const ids = readClaimIds(body, "event_ids");
  if (typeof ids === "string") return { reply: errorReply("invalidField", ids), outcome: "invalid_field", serverId, kid };
  try {
    const { results } = await rpcs.claimPullEvents({ serverId, eventIds: ids });
    const body = { results: results.map((r) => ({ event_id: r.eventId, status: PULL_CLAIM_STATUS_NAMES[r.status] ?? "unknown" })) };
    return { reply: { status: 200, body }, outcome: "claimed", serverId, kid };
  } catch (error) {
    return { ...rpcFailure(error), serverId, kid };
  }
}

/** A claim's ids (`heart_ids` or `event_ids`): 1 to MAX_PULL_CLAIM strings, or the error text naming the field. */
function readClaimIds(body: Record<string, unknown>, field: "heart_ids" | "event_ids"): string[] | string {
  const ids = body[field];
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_PULL_CLAIM || !ids.every((id) => typeof id === "string")) {
    return `${field} must be an array of 1-${MAX_PULL_CLAIM} strings`;
  }
  return ids as string[];
}

/** The server's pull secrets, the keys of the pull API (step 5). */
function pullSecrets(rpcs: PullRpcs): KeyPurpose {
  return {
    name: "pull key",
    resolve: (serverId) => rpcs.resolvePullKeys({ serverId }),
    ...(rpcs.refreshPullKeys ? { refresh: rpcs.refreshPullKeys.bind(rpcs) } : {}),
    status: { ok: PullKeyStatus.OK, unknownServer: PullKeyStatus.UNKNOWN_SERVER, disabled: PullKeyStatus.PULL_DISABLED },
    disabled: { kind: "pullDisabled", outcome: "pull_disabled" },
    surface: "public",
  };
}

type ListFields = { kind: "ok"; cursor: string; limit: number } | { kind: "invalid"; error: string };

function readListFields(body: JsonObject): ListFields {
  const cursor = body.cursor ?? "";
  if (typeof cursor !== "string") return { kind: "invalid", error: notStringText("cursor") };
  const limit = body.limit ?? 0;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 0 || limit > MAX_PULL_PAGE) {
    return { kind: "invalid", error: integerBetweenText("limit", 1, MAX_PULL_PAGE) };
  }
  return { kind: "ok", cursor, limit };
}

function rpcFailure(error: unknown): Pick<SignedResult, "reply" | "outcome" | "cause"> {
  // Failure policy: the table decides (400 for a bad cursor, 503 while a dependency is down); an unexpected failure is a
  // retryable 500; the cause of either is logged.
  const mapped = fromRpcError(error);
  return mapped.cause === undefined
    ? { reply: mapped.reply, outcome: `rejected_${mapped.reply.status}` }
    : { reply: mapped.reply, outcome: mapped.failure ?? "internal_error", cause: mapped.cause };
}
