import { createHash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import {
  ClaimStatus,
  PlayerIdKind,
  type CheckVoteRequestSchema,
  type CheckVoteResponse,
  type ClaimVoteRequestSchema,
  type ClaimVoteResponse,
} from "../gen/proto/claims/v1/claims_pb.js";
import type { FailureLimiter } from "./failure-limiter.js";
import { errorReply, fromRpcError, type HttpReply } from "./http-errors.js";
import type { RawReply } from "./http-errors.js";

/**
 * The public check/claim API for reward plugins (issue 19): the three answer families the published
 * plugins parse, served from the referral service's ClaimService. The key in the query string is the
 * credential: whoever holds a server's claim key may check and claim that server's votes, nothing else.
 *
 * - `GET /api/votes`: the digit families, told apart by their parameters (VOTES_ACTIONS):
 *   rust-servers.net's `object=votes&element=claim` (check; with `action=post`, claim) and the
 *   status/claim family's `action=status` / `action=claim`. Answers exactly one digit, `text/plain`.
 * - `GET /api/votes/json`, or `/api/votes?format=json`: the same, as `{"voted","claimed",...}` (VoteReward).
 *
 * A wrong key answers exactly what an unknown player gets (`0`); unknown or missing parameters answer
 * `0` too, without any call. Wrong keys are charged to their source (the client address) in the
 * gateway's guess limiter, and to nothing else: past its limit, that source's keys the gateway has not
 * seen work answer `0` with 429 and Retry-After, while every other source - a plugin with a new or
 * rotated key included - is answered as usual. A key seen working (KnownClaimKeys) is never charged nor
 * refused. The key never reaches a log line, a metric label or an error message: the request log
 * records the path without the query.
 */

/** The digit families' path. */
export const VOTES_PATH = "/api/votes";
/** The JSON family's path (VoteReward's `.vrc` check/claim URLs). */
export const VOTES_JSON_PATH = "/api/votes/json";

/**
 * The paths the reward plugins' preset list entries request, served exactly as VOTES_PATH (or VOTES_JSON_PATH
 * when `json`), so that a preset works after changing only its host (issue 33). Read in each plugin's source:
 * EasyVoteExtended 3.0.4-3.2.9's default "Voting Sites API Information", the FiveM vote script's `endpoints`,
 * VoteReward's own `.vrc` migration and RocketMod Votifier's default services. Presets of other parameter
 * families (gamesfinder's `mode=claim`, top-games' `server_token`, unturnedsl's path parameters) are not served.
 */
export const PLUGIN_PRESET_PATHS: ReadonlyArray<{ path: string; json: boolean; usedBy: string }> = [
  { path: "/api/", json: false, usedBy: "rust-servers.net (EasyVoteExtended), unturned-servers.net (RocketMod Votifier)" },
  { path: "/vote/", json: false, usedBy: "trackyserver (EasyVoteExtended, the FiveM vote script)" },
  { path: "/vote-api.php", json: false, usedBy: "rustservers.gg (EasyVoteExtended)" },
  { path: "/api/vote.php", json: false, usedBy: "bestservers.com (EasyVoteExtended)" },
  { path: "/api/vote", json: false, usedBy: "rustserverlist.com (EasyVoteExtended 3.2.x)" },
  { path: "/api-vrc/", json: true, usedBy: "minecraftpocket-servers.com (VoteReward)" },
];

/** Longest claim key the gateway forwards; a longer one cannot be a key and answers `0` without a call. */
export const MAX_CLAIM_KEY_CHARS = 256;
/** Longest player id the gateway forwards; a longer one answers `0` without a call (the RPC bounds each kind itself). */
export const MAX_PLAYER_ID_CHARS = 512;

/** Window of the wrong-key limit. */
export const DEFAULT_CLAIM_KEY_GUESS_WINDOW_MS = 60_000;
/**
 * Wrong claim keys per source (client address) per window before that source's unknown keys are refused
 * (429). There is no global budget: it would let guessers get a right key refused. A key has 256 random
 * bits, so guessing is hopeless; the budget only bounds the database work, one index lookup per guess.
 */
export const DEFAULT_CLAIM_KEY_GUESSES_PER_SOURCE = 30;
/**
 * Calls with keys not yet known to work, from one source, in flight at once (counted apart from the wrong keys): a
 * hosting company's game servers share an address, and after a gateway restart (or on their first poll) every key of
 * theirs is unknown at once; with in-flight calls charged to the 30 wrong keys, the 31st concurrent right key was
 * refused. A burst of guesses is bounded by this plus the wrong keys, one index lookup each.
 */
export const DEFAULT_CLAIM_KEY_PENDING_PER_SOURCE = 256;
/** How long a key seen working stays exempt from the limiter (renewed on every right answer). */
export const KNOWN_CLAIM_KEY_TTL_MS = 24 * 60 * 60_000;
/**
 * Keys remembered at most; the least recently right one is dropped beyond it. Sized for a large list's every server
 * (10,000 servers polling the reward queue each 30 s kept falling out of a 10,000-key memory and met the limiter
 * again); about 100 bytes a digest with the map's entry: 20 MB at most.
 */
const MAX_KNOWN_CLAIM_KEYS = 200_000;

/** The query parameter of each player id kind, as the plugins send them. */
export const PLAYER_ID_PARAMS = {
  steamid: PlayerIdKind.STEAM_ID,
  username: PlayerIdKind.USERNAME,
  discordid: PlayerIdKind.DISCORD_ID,
  uuid: PlayerIdKind.MINECRAFT_UUID,
  accountid: PlayerIdKind.ACCOUNT_ID,
} as const;

/** The ClaimService RPCs the routes call; they throw ConnectError. */
export interface ClaimRpcs {
  checkVote(request: MessageInitShape<typeof CheckVoteRequestSchema>): Promise<CheckVoteResponse>;
  claimVote(request: MessageInitShape<typeof ClaimVoteRequestSchema>): Promise<ClaimVoteResponse>;
}

/** What the route passes in: the raw query, which answer form, and the client's address. */
export interface VoteClaimInput {
  /** The query string without `?`, as received. */
  query: string;
  /** True on VOTES_JSON_PATH. */
  jsonPath: boolean;
  /** The client's address (the guess limiter's per-source budget). */
  source: string;
}

/** The answer plus what the request log records (never the key). */
export interface VoteClaimResult {
  reply: RawReply;
  outcome: string;
  serverId?: string;
  /** Set for 500s and the 503 of a dependency that is down: the cause, logged with the request id, never sent. */
  cause?: unknown;
}

/** One parsed request: which RPC, the key and the one player id. */
export type VoteQuery =
  | { kind: "ask"; action: "check" | "claim"; json: boolean; key: string; player: { kind: PlayerIdKind; value: string } }
  | { kind: "unanswerable"; json: boolean; outcome: string };

/**
 * Reads a plugin's query. The action, by family:
 * - `object=votes&element=claim` without `action` -> check; with `action=post` -> claim (rust-servers.net);
 * - `action=custom&object=plugin&element=reward` -> claim (EasyVoteExtended's default rust-servers.net claim URL);
 * - `action=status` -> check, `action=claim` -> claim (rustservers.gg, trackyserver, bestservers, rustserverlist).
 * Then `key` and exactly one player id (PLAYER_ID_PARAMS). Other parameters (`server`, `customid`, ...) are ignored.
 */
export function parseVoteQuery(query: string, jsonPath: boolean): VoteQuery {
  const params = new URLSearchParams(query);
  const json = jsonPath || params.get("format")?.toLowerCase() === "json";
  const unanswerable = (outcome: string): VoteQuery => ({ kind: "unanswerable", json, outcome });
  const action = actionOf(params);
  if (action === undefined) return unanswerable("unknown_action");
  const key = params.get("key") ?? "";
  if (key === "") return unanswerable("missing_key");
  if (key.length > MAX_CLAIM_KEY_CHARS) return unanswerable("key_too_long");
  const ids = Object.entries(PLAYER_ID_PARAMS).filter(([name]) => (params.get(name) ?? "") !== "");
  if (ids.length === 0) return unanswerable("missing_player_id");
  if (ids.length > 1) return unanswerable("several_player_ids");
  const [name, kind] = ids[0] as [keyof typeof PLAYER_ID_PARAMS, PlayerIdKind];
  const value = params.get(name) as string;
  if (value.length > MAX_PLAYER_ID_CHARS) return unanswerable("player_id_too_long");
  return { kind: "ask", action, json, key, player: { kind, value } };
}

function actionOf(params: URLSearchParams): "check" | "claim" | undefined {
  const lower = (name: string) => params.get(name)?.toLowerCase();
  const action = lower("action");
  const votesClaim = lower("object") === "votes" && lower("element") === "claim";
  if (action === undefined) return votesClaim ? "check" : undefined;
  if (action === "status") return "check";
  if (action === "claim") return "claim";
  if (action === "post" && votesClaim) return "claim";
  if (action === "custom" && lower("object") === "plugin" && lower("element") === "reward") return "claim";
  return undefined;
}

/**
 * The gateway's memory of claim keys that worked: a key in it is never charged to, nor refused by,
 * the guess limiter (the way cached signing keys bypass the failed-signature limits). Holds SHA-256
 * digests, never keys; bounded; an entry lives KNOWN_CLAIM_KEY_TTL_MS from its last right answer. It
 * vouches only for skipping the limiter: every request still asks the service, which decides the key.
 */
export interface KnownClaimKeys {
  has(key: string): boolean;
  remember(key: string): void;
  forget(key: string): void;
}

/** Builds KnownClaimKeys. */
export function createKnownClaimKeys(opts: { ttlMs?: number; now?: () => number } = {}): KnownClaimKeys {
  const ttlMs = opts.ttlMs ?? KNOWN_CLAIM_KEY_TTL_MS;
  const now = opts.now ?? Date.now;
  const until = new Map<string, number>();
  const digest = (key: string) => createHash("sha256").update(key).digest("base64");
  return {
    has(key) {
      const id = digest(key);
      const expires = until.get(id);
      if (expires === undefined) return false;
      if (expires > now()) return true;
      until.delete(id);
      return false;
    },
    remember(key) {
      const id = digest(key);
      until.delete(id);
      until.set(id, now() + ttlMs);
      if (until.size > MAX_KNOWN_CLAIM_KEYS) until.delete(until.keys().next().value as string);
    },
    forget(key) {
      until.delete(digest(key));
    },
  };
}

/** The guess limiter and the known keys, one pair per gateway process. */
export interface ClaimKeyGuard {
  limiter: FailureLimiter;
  known: KnownClaimKeys;
}

/** One ClaimService answer, whichever RPC gave it. */
type ClaimAnswer = CheckVoteResponse | ClaimVoteResponse;

/** The JSON family's status names. */
const STATUS_NAMES: Partial<Record<ClaimStatus, string>> = {
  [ClaimStatus.NOT_FOUND]: "not_found",
  [ClaimStatus.VOTED_UNCLAIMED]: "voted_unclaimed",
  [ClaimStatus.CLAIMED_NOW]: "claimed_now",
  [ClaimStatus.ALREADY_CLAIMED]: "already_claimed",
  [ClaimStatus.PAID_ELSEWHERE]: "paid_elsewhere",
};

/**
 * The digit of each status, per action: check answers 0/1/2 (not found, voted and unclaimed, claimed),
 * claim answers 0/1/2 (nothing to claim, claimed now: pay, already claimed: do not pay). A heart paid
 * by another transport (pay-once mode) is `0` on both: "nothing to pay" in every plugin's reading,
 * where a `2` reads as "your earlier, uncertain claim went through" to EasyVoteExtended 3.2.x. A status
 * the action cannot give has no digit and is answered 500 (fail closed: a claim never pays on a surprise).
 */
const DIGITS: Record<"check" | "claim", Partial<Record<ClaimStatus, "0" | "1" | "2">>> = {
  check: { [ClaimStatus.NOT_FOUND]: "0", [ClaimStatus.VOTED_UNCLAIMED]: "1", [ClaimStatus.ALREADY_CLAIMED]: "2", [ClaimStatus.PAID_ELSEWHERE]: "0" },
  claim: { [ClaimStatus.NOT_FOUND]: "0", [ClaimStatus.CLAIMED_NOW]: "1", [ClaimStatus.ALREADY_CLAIMED]: "2", [ClaimStatus.PAID_ELSEWHERE]: "0" },
};

/** The JSON family's body (schema VoteClaimAnswer in gateway/openapi.ts). */
export interface VoteClaimJson {
  voted: boolean;
  claimed: boolean;
  status: string;
  heart_id: string | null;
  voted_at: string | null;
  claimed_at: string | null;
  expires_at: string | null;
}

const NOT_FOUND_JSON: VoteClaimJson = {
  voted: false,
  claimed: false,
  status: "not_found",
  heart_id: null,
  voted_at: null,
  claimed_at: null,
  expires_at: null,
};

/** The plugins' answer: one digit, `text/plain`, no newline; or the JSON body. Never cached by proxies. */
function answer(json: boolean, status: number, body: "0" | "1" | "2" | VoteClaimJson, headers: Record<string, string> = {}): RawReply {
  if (json) {
    const value = typeof body === "string" ? NOT_FOUND_JSON : body;
    return { status, headers: { "content-type": "application/json", "cache-control": "no-store", ...headers }, body: JSON.stringify(value) };
  }
  const digit = typeof body === "string" ? body : "0";
  return { status, headers: { "content-type": "text/plain", "cache-control": "no-store", ...headers }, body: digit };
}

/** An error of the public table (gateway/http-errors.ts) as raw bytes. */
function jsonReply(reply: HttpReply): RawReply {
  return { status: reply.status, headers: { "content-type": "application/json", ...reply.headers }, body: JSON.stringify(reply.body) };
}

const iso = (at: Timestamp | undefined) => (at === undefined ? null : timestampDate(at).toISOString());

/**
 * The JSON family's body. `voted`: the player has a held or claimed heart. `claimed`: on check, the ledger
 * says claimed (ALREADY_CLAIMED); on claim, THIS call claimed it (CLAIMED_NOW) - so a claim that lost a race
 * (ALREADY_CLAIMED) answers `claimed: false` with `status: "already_claimed"`, and VoteReward, which pays
 * when the claim answers `voted && claimed`, pays once. A heart another transport paid answers `voted: true,
 * claimed: false, status: "paid_elsewhere"`: VoteReward's check then claims, and the claim answers the same
 * (nothing paid). A status the action cannot give has no body (500).
 */
function toJson(action: "check" | "claim", response: ClaimAnswer): VoteClaimJson | undefined {
  const status = STATUS_NAMES[response.status];
  if (status === undefined || DIGITS[action][response.status] === undefined) return undefined;
  if (response.status === ClaimStatus.NOT_FOUND) return NOT_FOUND_JSON;
  return {
    voted: true,
    claimed: action === "check" ? response.status === ClaimStatus.ALREADY_CLAIMED : response.status === ClaimStatus.CLAIMED_NOW,
    status,
    heart_id: response.heartId === "" ? null : response.heartId,
    voted_at: iso(response.votedAt),
    claimed_at: iso(response.claimedAt),
    expires_at: iso(response.expiresAt),
  };
}

/**
 * GET /api/votes and /api/votes/json: parse (unknown or missing parameters answer `0` with no call),
 * the guess limiter for keys not known to work, the RPC, then the family's bytes. A malformed player id
 * (the RPC's invalid_argument, checked before the key) answers `0` and is not charged: it says nothing
 * about the key. Any other RPC failure is the public error table's answer: a 503 (the service or its database
 * down, or overloaded) keeps the family's body (`0`, or the not-found JSON) with Retry-After, as a 429 does; a
 * 500 is JSON. The plugins treat a status other than 200 as a failed request and pay nothing.
 */
export async function handleVoteClaim(input: VoteClaimInput, rpcs: ClaimRpcs, guard: ClaimKeyGuard): Promise<VoteClaimResult> {
  const parsed = parseVoteQuery(input.query, input.jsonPath);
  if (parsed.kind === "unanswerable") return { reply: answer(parsed.json, 200, "0"), outcome: parsed.outcome };
  const { action, json, key, player } = parsed;

  try {
    const request = { claimKey: key, player };
    const guarded = await callGuarded(
      guard,
      key,
      input.source,
      (): Promise<ClaimAnswer> => (action === "check" ? rpcs.checkVote(request) : rpcs.claimVote(request)),
    );
    if (guarded.kind === "limited") {
      return { reply: answer(json, 429, "0", { "retry-after": String(guarded.retryAfterSeconds) }), outcome: "claim_key_guess_limit" };
    }
    const response = guarded.response;
    if (!response.keyValid) return { reply: answer(json, 200, "0"), outcome: "wrong_key" };
    const served = json ? toJson(action, response) : DIGITS[action][response.status];
    if (served === undefined) {
      // Failure policy: fail closed - a status this action cannot give is a service bug; answer 500, never a digit that could pay.
      return {
        reply: jsonReply(errorReply("internal")),
        outcome: "internal_error",
        serverId: response.serverId,
        cause: new Error(`unexpected ${action} status ${response.status}`),
      };
    }
    return { reply: answer(json, 200, served), outcome: `${action}_${STATUS_NAMES[response.status]}`, serverId: response.serverId };
  } catch (error) {
    if (error instanceof ConnectError && error.code === Code.InvalidArgument) {
      // Failure policy: a malformed player id is "not found" to the plugins (they parse only digits); not a key guess.
      return { reply: answer(json, 200, "0"), outcome: "invalid_player_id" };
    }
    // Failure policy: the public error table decides (503 while the service or its database is down or overloaded, else 500);
    // a 503 keeps the plugins' body format (the digit `0`, or the not-found JSON: pays nothing) with its Retry-After, as a 429
    // does; the cause is logged, never sent.
    const mapped = fromRpcError(error);
    const retryAfter = mapped.reply.headers?.["retry-after"];
    const reply = mapped.reply.status === 503 && retryAfter !== undefined ? answer(json, 503, "0", { "retry-after": retryAfter }) : jsonReply(mapped.reply);
    if (mapped.cause === undefined) return { reply, outcome: mapped.reply.status === 503 ? "service_overloaded" : "rejected_by_service" };
    return { reply, outcome: mapped.failure ?? "internal_error", cause: mapped.cause };
  }
}

/** A key-checked call's outcome under the guess limiter: refused before the call, or the call's answer. */
export type GuardedCall<R> = { kind: "limited"; retryAfterSeconds: number } | { kind: "answered"; response: R };

/**
 * THE claim key rule of the gateway's key-checked APIs (the check/claim API, the reward queue): a key not known to work
 * meets the source's guess limiter (refused past it, without the call); the call's `keyValid` false is charged to the
 * source as a wrong guess and forgets the key, true remembers it (never charged nor refused again while remembered). A
 * call that throws is charged nothing; the error is the caller's to answer.
 */
export async function callGuarded<R extends { keyValid: boolean }>(
  guard: ClaimKeyGuard,
  key: string,
  source: string,
  call: () => Promise<R>,
): Promise<GuardedCall<R>> {
  const admission = guard.known.has(key) ? undefined : guard.limiter.admit(source);
  if (admission?.kind === "limited") return { kind: "limited", retryAfterSeconds: admission.retryAfterSeconds };
  let wrongKey = false;
  try {
    const response = await call();
    wrongKey = !response.keyValid;
    if (wrongKey) guard.known.forget(key);
    else guard.known.remember(key);
    return { kind: "answered", response };
  } finally {
    admission?.done(wrongKey);
  }
}
