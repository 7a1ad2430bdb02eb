import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Prisma } from "../../gen/prisma/client.js";
import type { PluginCall, RecordPluginCallsRequest } from "../../gen/proto/claims/v1/plugin_activity_pb.js";
import { PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError } from "../shared/rpc/errors.js";
import { isUuid } from "../shared/values/ids.js";
import { MAX_PLUGIN_CALL_PLAYER_ID_CHARS, MAX_PLUGIN_CALLS_PER_BATCH } from "../shared/values/plugin-call-limits.js";
import { PLAYER_ID_KIND_NAMES, PLUGIN_CALL_OUTCOME_NAMES } from "../shared/values/proto-names.js";
import { runSql } from "../shared/adapters/sql/executor.js";

/** A count whose `since` is this old starts over at its next call: the card's counts cover at most the last hour. */
export const PLUGIN_ACTIVITY_COUNT_WINDOW_MS = 60 * 60_000;
/** Age limit: a row whose last call is this old is deleted (plugin_activity, prisma/schema.prisma). */
export const PLUGIN_ACTIVITY_MAX_AGE_MS = 30 * 24 * 60 * 60_000;
/** Old rows deleted per batch at most (the age limit's small batches, run by the write statement itself). */
export const PLUGIN_ACTIVITY_DELETE_PER_BATCH = 100;
/** Longest path or answer a call may name; a call with a longer one is dropped (the gateway's are short). */
const MAX_LABEL_CHARS = 32;
const FAMILY_SHAPE = /^\/[A-Za-z0-9/._-]*$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;
/** The stored id kind of a reward queue call, which names no player. */
export const NO_PLAYER_KIND = "none";

/** One call as the statement takes it: validated, names instead of enums, the key's hash only to find its server. */
export interface CallRow {
  at: Date;
  family: string;
  kind: string;
  outcome: string;
  action: string;
  answer: string;
  serverId: string | null;
  keyHash: string | null;
  urlServerId: string | null;
  playerId: string | null;
}

/** A call of the request as a row, or null when it cannot be stored (unknown kind or outcome, a label out of shape). */
function toCallRow(call: PluginCall): CallRow | null {
  // A reward queue call (list, ack) names no player: its kind is `none`; a check or claim names one of its kind.
  const queueCall = call.action === "list" || call.action === "ack";
  const kind = queueCall ? (call.playerIdKind === PlayerIdKind.UNSPECIFIED ? NO_PLAYER_KIND : undefined) : PLAYER_ID_KIND_NAMES[call.playerIdKind];
  const outcome = PLUGIN_CALL_OUTCOME_NAMES[call.outcome];
  if (kind === undefined || outcome === undefined || call.at === undefined) return null;
  if (call.family.length > MAX_LABEL_CHARS || !FAMILY_SHAPE.test(call.family)) return null;
  if (call.answer === "" || call.answer.length > MAX_LABEL_CHARS) return null;
  if (call.action !== "check" && call.action !== "claim" && !queueCall) return null;
  const uuidOrNull = (id: string) => (isUuid(id) ? id : null);
  return {
    at: timestampDate(call.at),
    family: call.family,
    kind,
    outcome,
    action: call.action,
    answer: call.answer,
    serverId: uuidOrNull(call.serverId),
    keyHash: SHA256_HEX.test(call.claimKeySha256) ? call.claimKeySha256 : null,
    // The URL's server vouches for nothing: it attributes a wrong key only (a right key names its own server).
    urlServerId: outcome === "wrong_key" ? uuidOrNull(call.urlServerId) : null,
    // A wrong-key call may come from anyone: its player id is not the owner's player and is not kept.
    playerId: outcome === "wrong_key" || call.playerId === "" ? null : call.playerId.slice(0, MAX_PLUGIN_CALL_PLAYER_ID_CHARS),
  };
}

/**
 * THE write of plugin_activity, ONE statement per batch: the calls as arrays (unnest), each attributed to a
 * server - the one the answer named, else the one whose claim key (active or not) has the call's key hash,
 * else, for a wrong key, the one the URL names - and dropped when none exists; then grouped per row key (a
 * row is changed once per statement), upserted (calls added, or started over when the row's count is an hour
 * old; the last call's fields from the newest call), and at most PLUGIN_ACTIVITY_DELETE_PER_BATCH rows past the
 * age limit deleted, none of them a row this batch writes. Reads: one index lookup per call (servers' primary
 * key, server_secrets' unique lookup_hash) and at most PLUGIN_ACTIVITY_DELETE_PER_BATCH rows of the last_at index.
 */
export function upsertPluginCalls(rows: readonly CallRow[], now: Date): Prisma.Sql {
  const column = <T>(pick: (row: CallRow) => T) => rows.map(pick);
  const cutoff = new Date(now.getTime() - PLUGIN_ACTIVITY_MAX_AGE_MS);
  return Prisma.sql`
    WITH c AS (
      SELECT * FROM unnest(
        ${rows.map((_, i) => i)}::int[], ${column((r) => r.at.toISOString())}::timestamptz[], ${column((r) => r.family)}::text[],
        ${column((r) => r.kind)}::text[], ${column((r) => r.outcome)}::text[], ${column((r) => r.action)}::text[],
        ${column((r) => r.answer)}::text[], ${column((r) => r.serverId)}::uuid[], ${column((r) => r.keyHash)}::text[],
        ${column((r) => r.urlServerId)}::uuid[], ${column((r) => r.playerId)}::text[]
      ) AS c(idx, at, family, kind, outcome, action, answer, server_id, key_hash, url_server_id, player_id)
    ), attributed AS (
      SELECT c.*, coalesce(
        (SELECT s.id FROM servers s WHERE s.id = c.server_id),
        (SELECT k.server_id FROM server_secrets k WHERE k.lookup_hash = c.key_hash AND k.purpose = 'claim'),
        (SELECT s.id FROM servers s WHERE s.id = c.url_server_id)
      ) AS sid
      FROM c
    ), grouped AS (
      SELECT DISTINCT ON (sid, family, kind, outcome) sid, family, kind, outcome, at, action, answer, player_id,
             count(*) OVER w AS n, min(at) OVER w AS first_at
      FROM attributed
      WHERE sid IS NOT NULL
      WINDOW w AS (PARTITION BY sid, family, kind, outcome)
      ORDER BY sid, family, kind, outcome, at DESC, idx DESC
    ), gone AS (
      DELETE FROM plugin_activity p
      WHERE p.ctid = ANY(ARRAY(
        SELECT o.ctid FROM plugin_activity o
        WHERE o.last_at < ${cutoff}::timestamptz
          AND NOT EXISTS (SELECT 1 FROM grouped g WHERE g.sid = o.server_id AND g.family = o.family AND g.kind = o.player_id_kind AND g.outcome = o.outcome)
        ORDER BY o.last_at LIMIT ${PLUGIN_ACTIVITY_DELETE_PER_BATCH}
      ))
    ), up AS (
      INSERT INTO plugin_activity AS p (server_id, family, player_id_kind, outcome, calls, since, last_at, last_action, last_answer, last_player_id)
      SELECT sid, family, kind, outcome, n::int, first_at, at, action, answer, player_id FROM grouped
      -- One order of row locks for every gateway's batch: two batches upserting the same rows cannot deadlock.
      ORDER BY sid, family, kind, outcome
      ON CONFLICT (server_id, family, player_id_kind, outcome) DO UPDATE SET
        calls = CASE WHEN p.since < EXCLUDED.last_at - ${`${PLUGIN_ACTIVITY_COUNT_WINDOW_MS} milliseconds`}::interval THEN EXCLUDED.calls
                     ELSE least(p.calls::int8 + EXCLUDED.calls, 2147483647)::int END,
        since = CASE WHEN p.since < EXCLUDED.last_at - ${`${PLUGIN_ACTIVITY_COUNT_WINDOW_MS} milliseconds`}::interval THEN EXCLUDED.since ELSE p.since END,
        last_at = greatest(p.last_at, EXCLUDED.last_at),
        last_action = CASE WHEN EXCLUDED.last_at >= p.last_at THEN EXCLUDED.last_action ELSE p.last_action END,
        last_answer = CASE WHEN EXCLUDED.last_at >= p.last_at THEN EXCLUDED.last_answer ELSE p.last_answer END,
        last_player_id = CASE WHEN EXCLUDED.last_at >= p.last_at THEN EXCLUDED.last_player_id ELSE p.last_player_id END
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM attributed WHERE sid IS NOT NULL) AS kept`;
}

/**
 * RecordPluginCalls: stores the gateway's batch of check/claim calls (upsertPluginCalls, one statement); a call
 * that cannot be stored or names no existing server is dropped, and the answer says how many were kept. More
 * than MAX_PLUGIN_CALLS_PER_BATCH calls is invalid_argument. Never stores a claim key, its hash or an address.
 */
export async function recordPluginCalls(deps: CoreDeps, req: RecordPluginCallsRequest): Promise<{ kept: number }> {
  if (req.calls.length > MAX_PLUGIN_CALLS_PER_BATCH) {
    throw new DomainError("invalid_argument", `calls: at most ${MAX_PLUGIN_CALLS_PER_BATCH} per request`);
  }
  const rows = req.calls.map(toCallRow).filter((row): row is CallRow => row !== null);
  if (rows.length === 0) return { kept: 0 };
  const [result] = await runSql<{ kept: bigint }>(deps.prisma, upsertPluginCalls(rows, deps.now()));
  return { kept: Number(result?.kept ?? 0n) };
}

/**
 * A voter's erasure (services/voter-data/erase-voter-data.ts): the server's plugin activity rows whose last player id
 * is one of the voter's `ids` (lower-cased) forget it. By the primary key's server prefix: at most 164 rows a server (MAX_PLUGIN_ACTIVITY_ROWS).
 */
export function erasePluginPlayerIdsSql(q: { serverId: string; ids: readonly string[] }): Prisma.Sql {
  return Prisma.sql`
    UPDATE plugin_activity SET last_player_id = NULL
    WHERE server_id = ${q.serverId}::uuid AND lower(last_player_id) = ANY(${[...q.ids]}::text[])`;
}
