import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type {
  AckRewardEntriesRequestSchema,
  AckRewardEntriesResponse,
  ListRewardQueueRequestSchema,
  ListRewardQueueResponse,
  RewardQueueEntry,
} from "../gen/proto/rewards/v1/rewards_pb.js";
import { isUuid } from "../services/shared/values/ids.js";
import { MAX_ACK_IDS, MAX_ONLINE_NAME_CHARS, MAX_ONLINE_PLAYERS, MAX_REWARD_QUEUE_PAGE } from "../services/shared/values/reward-queue-limits.js";
import { MAX_CLAIM_KEY_CHARS, callGuarded, type ClaimKeyGuard } from "./handle-vote-claim.js";
import { errorReply, fromRpcError, type HttpReply, type RawReply } from "./http-errors.js";

/**
 * The reward queue API for game plugins (issue 31, docs/reward-queue.md), modelled on a store's plugin command queue: the
 * plugin lists its server's pending entries, runs their commands, and acknowledges the ids it ran. Same key model as the
 * check/claim API (handle-vote-claim.ts): the server's claim key in the query string is the credential, resolved by the
 * referral service; a wrong key answers what an empty queue answers (no entry, nothing acknowledged) and is charged to
 * its source in the gateway's guess limiter (past its limit: 429 with Retry-After), a key seen working never is. The key
 * never reaches a log line, a metric label or an error text: the request log records the path without the query.
 *
 * - `GET /api/rewards/queue?key=...[&online=<name>,<name>...][&limit=N]`: `{"entries": [...], "next_check": <seconds>}`.
 * - `POST /api/rewards/queue/ack?key=...` with `{"ids": [...]}`: `{"acked": [...], "unknown": [...]}`.
 */

/** The 429's text past the guess limiter (the check/claim API answers its families' `0` instead). */
export const TOO_MANY_KEY_GUESSES_TEXT = "too many wrong keys from this address; retry after the Retry-After delay";

/** The list's path. */
export const REWARD_QUEUE_PATH = "/api/rewards/queue";
/** The acknowledgement's path. */
export const REWARD_QUEUE_ACK_PATH = "/api/rewards/queue/ack";

/** The RewardQueueService RPCs the routes call; they throw ConnectError. */
export interface RewardQueueRpcs {
  listRewardQueue(request: MessageInitShape<typeof ListRewardQueueRequestSchema>): Promise<ListRewardQueueResponse>;
  ackRewardEntries(request: MessageInitShape<typeof AckRewardEntriesRequestSchema>): Promise<AckRewardEntriesResponse>;
}

/** The answer plus what the request log records (never the key). */
export interface RewardQueueResult {
  reply: RawReply;
  outcome: string;
  serverId?: string;
  /** Set for 500s and the 503 of a dependency that is down: the cause, logged with the request id, never sent. */
  cause?: unknown;
}

/** One listed entry as the plugin reads it (schema RewardQueueEntry in gateway/openapi.ts). */
export interface RewardQueueEntryJson {
  id: string;
  reason: string;
  player: { name: string; steam_id: string | null; discord_id: string | null; minecraft_uuid: string | null; account_id: string | null };
  commands: string[];
  online_only: boolean;
  created_at: string | null;
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): RawReply {
  return { status, headers: { "content-type": "application/json", "cache-control": "no-store", ...headers }, body: JSON.stringify(body) };
}

function errorJson(reply: HttpReply): RawReply {
  return json(reply.status, reply.body, reply.headers);
}

const invalid = (text: string): RewardQueueResult => ({ reply: errorJson(errorReply("invalidField", text)), outcome: "invalid_request" });

/** The key of the query: missing is bad input (400); one longer than any key is a wrong key, answered without a call. */
function keyOf(params: URLSearchParams): { kind: "key"; key: string } | { kind: "missing" } | { kind: "wrong" } {
  const key = params.get("key") ?? "";
  if (key === "") return { kind: "missing" };
  return key.length > MAX_CLAIM_KEY_CHARS ? { kind: "wrong" } : { kind: "key", key };
}

/** A parsed list request, or the 400 text of its first problem. */
export type QueueListQuery = { kind: "ok"; limit: number; online: string[] | undefined } | { kind: "invalid"; text: string };

/** Reads a list's `limit` (1..MAX_REWARD_QUEUE_PAGE; absent: the service's default) and `online` (comma-separated, or repeated). */
export function parseQueueListQuery(params: URLSearchParams): QueueListQuery {
  const rawLimit = params.get("limit");
  let limit = 0;
  if (rawLimit !== null) {
    limit = /^\d{1,4}$/.test(rawLimit) ? Number(rawLimit) : 0;
    if (limit < 1 || limit > MAX_REWARD_QUEUE_PAGE) return { kind: "invalid", text: `limit: must be a whole number from 1 to ${MAX_REWARD_QUEUE_PAGE}` };
  }
  if (!params.has("online")) return { kind: "ok", limit, online: undefined };
  const online = params
    .getAll("online")
    .flatMap((value) => value.split(","))
    .map((name) => name.trim())
    .filter((name) => name !== "");
  if (online.length > MAX_ONLINE_PLAYERS) return { kind: "invalid", text: `online: at most ${MAX_ONLINE_PLAYERS} players per list` };
  if (online.some((name) => name.length > MAX_ONLINE_NAME_CHARS))
    return { kind: "invalid", text: `online: a name is longer than ${MAX_ONLINE_NAME_CHARS} characters` };
  return { kind: "ok", limit, online };
}

/** Reads an acknowledgement's body: `{"ids": [...]}` of 1..MAX_ACK_IDS entry ids, or the 400 text of its first problem. */
export function parseAckBody(body: Buffer): { kind: "ok"; ids: string[] } | { kind: "invalid"; text: string } {
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch {
    // Failure policy: a plugin's broken JSON is its error, answered 400; the parser's message may quote the body.
    return { kind: "invalid", text: "body is not valid JSON" };
  }
  const ids = (value as { ids?: unknown } | null)?.ids;
  if (typeof value !== "object" || value === null || Array.isArray(value) || !Array.isArray(ids))
    return { kind: "invalid", text: 'body must be {"ids": [...]}' };
  if (ids.length === 0) return { kind: "invalid", text: "ids: at least one id is required" };
  if (ids.length > MAX_ACK_IDS) return { kind: "invalid", text: `ids: at most ${MAX_ACK_IDS} per acknowledgement` };
  const bad = ids.findIndex((id) => typeof id !== "string" || !isUuid(id));
  if (bad !== -1) return { kind: "invalid", text: `ids[${bad}]: not an entry id (a uuid)` };
  return { kind: "ok", ids: ids as string[] };
}

const orNull = (value: string) => (value === "" ? null : value);

function toEntryJson(e: RewardQueueEntry): RewardQueueEntryJson {
  return {
    id: e.id,
    reason: e.reason,
    player: {
      name: e.username,
      steam_id: orNull(e.steamId),
      discord_id: orNull(e.discordId),
      minecraft_uuid: orNull(e.minecraftUuid),
      account_id: orNull(e.accountId),
    },
    commands: e.commands,
    online_only: e.onlineOnly,
    created_at: e.createdAt ? timestampDate(e.createdAt).toISOString() : null,
  };
}

/**
 * One RPC under the claim key rule (handle-vote-claim.ts callGuarded): 429 past the guess limiter, `wrongKey` for a key
 * the service did not know, else `answer`. An RPC failure is the public error table's answer (400 for a request the
 * service refused, 503 while it or its database is down, else 500), never charged.
 */
async function guarded<R extends { keyValid: boolean; serverId: string }>(
  guard: ClaimKeyGuard,
  key: string,
  source: string,
  call: () => Promise<R>,
  answer: (response: R) => RewardQueueResult,
  wrongKey: (response: R) => RewardQueueResult,
): Promise<RewardQueueResult> {
  try {
    const guarded = await callGuarded(guard, key, source, call);
    if (guarded.kind === "limited") {
      const headers = { "retry-after": String(guarded.retryAfterSeconds) };
      return { reply: errorJson(errorReply("tooManyKeyGuesses", TOO_MANY_KEY_GUESSES_TEXT, { headers })), outcome: "claim_key_guess_limit" };
    }
    const response = guarded.response;
    if (!response.keyValid) return wrongKey(response);
    return { ...answer(response), serverId: response.serverId };
  } catch (error) {
    // Failure policy: the public error table decides (400 for a request the service refused, 503 while the service or its
    // database is down or overloaded, else 500); the cause is logged, never sent; nothing is charged to the key.
    const mapped = fromRpcError(error);
    if (mapped.cause === undefined)
      return { reply: errorJson(mapped.reply), outcome: mapped.reply.status === 503 ? "service_overloaded" : "rejected_by_service" };
    return { reply: errorJson(mapped.reply), outcome: mapped.failure ?? "internal_error", cause: mapped.cause };
  }
}

/** The answer to a wrong key's list: an empty queue, polled again at the idle interval the service named. */
const emptyList = (nextCheck: number): RewardQueueResult => ({ reply: json(200, { entries: [], next_check: nextCheck }), outcome: "wrong_key" });

/** The idle interval a wrong key is told when the service was not asked (a key longer than any key). */
const WRONG_KEY_NEXT_CHECK_SECONDS = 120;

/** GET /api/rewards/queue: parse (bad input: 400 JSON naming the parameter), the key's guard, ListRewardQueue, the JSON. */
export async function handleRewardQueueList(input: { query: string; source: string }, rpcs: RewardQueueRpcs, guard: ClaimKeyGuard): Promise<RewardQueueResult> {
  const params = new URLSearchParams(input.query);
  const key = keyOf(params);
  if (key.kind === "missing") return invalid("key is required");
  const parsed = parseQueueListQuery(params);
  if (parsed.kind === "invalid") return invalid(parsed.text);
  if (key.kind === "wrong") return emptyList(WRONG_KEY_NEXT_CHECK_SECONDS);
  return guarded(
    guard,
    key.key,
    input.source,
    () => rpcs.listRewardQueue({ claimKey: key.key, limit: parsed.limit, withOnline: parsed.online !== undefined, online: parsed.online ?? [] }),
    (response) => ({
      reply: json(200, { entries: response.entries.map(toEntryJson), next_check: response.nextCheckSeconds }),
      outcome: response.entries.length > 0 ? "queue_listed" : "queue_empty",
    }),
    (response) => emptyList(response.nextCheckSeconds),
  );
}

/** POST /api/rewards/queue/ack: the key, the body (bad input: 400 JSON), the key's guard, AckRewardEntries, the JSON. */
export async function handleRewardQueueAck(
  input: { query: string; body: Buffer; source: string },
  rpcs: RewardQueueRpcs,
  guard: ClaimKeyGuard,
): Promise<RewardQueueResult> {
  const key = keyOf(new URLSearchParams(input.query));
  if (key.kind === "missing") return invalid("key is required");
  const parsed = parseAckBody(input.body);
  if (parsed.kind === "invalid") return invalid(parsed.text);
  const nothingAcked: RewardQueueResult = { reply: json(200, { acked: [], unknown: parsed.ids }), outcome: "wrong_key" };
  if (key.kind === "wrong") return nothingAcked;
  return guarded(
    guard,
    key.key,
    input.source,
    () => rpcs.ackRewardEntries({ claimKey: key.key, ids: parsed.ids }),
    (response) => ({
      reply: json(200, { acked: response.acked, unknown: response.unknown }),
      outcome: response.unknown.length > 0 ? "acked_some_unknown" : "acked",
    }),
    () => nothingAcked,
  );
}
