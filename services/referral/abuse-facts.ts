import { Prisma } from "../../gen/prisma/client.js";
import type { SqlTx } from "../shared/adapters/sql/executor.js";
import { DEFAULT_PLANNER_SETTINGS, fenceIndexLedPlans, type PlannerSettings, restorePlannerCte } from "../shared/adapters/sql/planner-fence.js";
import {
  abuseWindowsAt,
  detectSignals,
  foldSignals,
  type AbuseRules,
  type FoundSignals,
  type ReviewMode,
  type ReviewRecord,
  type ReviewState,
} from "./domain/abuse-signals.js";

/**
 * The anti-abuse facts of ApplyEvent (services/referral/apply-event.ts), read by a statement of their own
 * (readAbuseFacts) that a round runs only when one of its events mints or qualifies a referral on a server whose
 * review mode is not `off`. A server that never turned review on pays nothing for it: no statement, not a filter
 * the planner may apply after the expensive part. The pure rules (domain/abuse-signals.ts) turn the facts into
 * signals and a review state; the round's write statement stores them with the mint or the qualification.
 *
 * Bounded work: every count that only feeds a threshold stops at the threshold (LIMIT inside the count), and a
 * rule whose threshold is 0 (off) reads nothing. What each fact reads at most is stated beside it in the SQL.
 *
 * "The referee's hearts" (and the referrer's) are hearts on the same server whose `voter_identity`
 * equals the identity, or whose `username` equals it case-insensitively.
 */

/** An event that needs facts: a mint (`registered`) or a qualification, on a server whose review mode is not off. */
export interface AbuseFactsInput {
  /** The event's index in the round. */
  idx: number;
  stage: "registered" | "qualified";
  clickId: string;
  referee: string;
  referrer: string;
  /** The referral being qualified (its signals so far are folded with the new ones); null for a mint. */
  referralId: string | null;
  mode: ReviewMode;
}

/** What readAbuseFacts returns for one event. */
export interface AbuseFactsRow {
  idx: number;
  click_ip_known: boolean;
  shares_ip: boolean;
  shares_subnet: boolean;
  /** Other referees from the click's IP in the window, counted up to the rule's maximum (enough to decide it): the length of fanout_ip_referrals. */
  other_referees_ip: number;
  other_referees_subnet: number;
  /** Those referees' referral ids (at most the rule's maximum each): flagged too when the fan-out passes its limit. */
  fanout_ip_referrals: string[];
  fanout_subnet_referrals: string[];
  /** Clicks from the click's IP around it, counted up to the rule's maximum + 1. */
  clicks_from_ip: number;
  /** The referee's counted hearts before now, counted up to the rule's minimum (qualified only; 0 for a mint). */
  referee_hearts: number;
  signals_before: string[];
  details_before: Record<string, unknown> | null;
  review_before: string | null;
}

/** Whether an event on a server in `mode` needs facts: review on, and the event mints or qualifies. */
export function needsAbuseFacts(mode: string | null): mode is "loose" | "strict" {
  return mode === "loose" || mode === "strict";
}

/**
 * ONE statement for every event of the round that needs facts (none: no statement). Runs in the round's
 * transaction, after statement 1 and before the write.
 */
export async function readAbuseFacts(tx: SqlTx, inputs: readonly AbuseFactsInput[], rules: AbuseRules, now: Date): Promise<Map<number, AbuseFactsRow>> {
  if (inputs.length === 0) return new Map();
  // Every bound below is an index walk (ORDER BY its key, LIMIT n): fenced so no statistics can turn one into a scan
  // and sort of a player's or an address's whole history (one round trip more, on review-on rounds only).
  const before = await fenceIndexLedPlans(tx);
  const rows = await tx.query<Omit<AbuseFactsRow, "other_referees_ip" | "other_referees_subnet">>(abuseFactsSql(inputs, rules, now, before));
  return new Map(rows.map((r) => [r.idx, { ...r, other_referees_ip: r.fanout_ip_referrals.length, other_referees_subnet: r.fanout_subnet_referrals.length }]));
}

/** PostgreSQL's defaults, restored when no fence read the settings before (a caller measuring the statement alone). */
const DEFAULT_PLANNER: PlannerSettings = DEFAULT_PLANNER_SETTINGS;

/** readAbuseFacts's statement (exported for the test that checks the rows it reads on a skewed history). */
export function abuseFactsSql(inputs: readonly AbuseFactsInput[], rules: AbuseRules, now: Date, planner: PlannerSettings = DEFAULT_PLANNER): Prisma.Sql {
  const w = abuseWindowsAt(rules, now);
  const selfAddress = rules.selfReferralAddress.enabled;
  return Prisma.sql`
    WITH ${restorePlannerCte(planner)}, input AS (
      SELECT * FROM unnest(
        ${inputs.map((i) => i.idx)}::int[], ${inputs.map((i) => i.stage)}::text[], ${inputs.map((i) => i.clickId)}::uuid[],
        ${inputs.map((i) => i.referee)}::text[], ${inputs.map((i) => i.referrer)}::text[], ${inputs.map((i) => i.referralId)}::uuid[]
      ) AS i(idx, stage, click_id, referee, referrer, referral_id)
    )
    SELECT i.idx, ck.ip IS NOT NULL AS click_ip_known,
           -- The referrer's and the referee's latest hearts on this server (playerAddressesSql: at most
           -- SELF_ADDRESS_HEARTS per player and way of naming them, 4 x SELF_ADDRESS_HEARTS rows in all; none when the
           -- rule is off). "Same address" is the same keyed pseudonym (ip_key, subnet_key: kept for ever,
           -- services/shared/values/address-key.ts) or, while both rows still hold it (within the address horizon), the
           -- same address (rows without a key, or keys of two key versions).
           coalesce(ck.ip_key = ANY(rk.ip_keys), false) OR coalesce(ck.ip = ANY(rk.ips), false)
             OR coalesce(rk.ip_keys && ek.ip_keys, false) OR coalesce(rk.ips && ek.ips, false) AS shares_ip,
           coalesce(ck.subnet_key = ANY(rk.subnet_keys), false) OR coalesce(ck.subnet = ANY(rk.subnets), false)
             OR coalesce(rk.subnet_keys && ek.subnet_keys, false) OR coalesce(rk.subnets && ek.subnets, false) AS shares_subnet,
           -- Referees = distinct referrals (one per referee and server). Reads the LINKED clicks from the address in the
           -- window (a partial index holds only those): one per registration or join a server's backend signed from
           -- it, never the anonymous clicks an address can make at will. Counted up to the maximum: at most the
           -- clicks of max referees and max re-read entries (fanoutSql).
           ${fanoutSql("ip", w.ipFanoutSince, rules.ipFanout.maxReferees)} AS fanout_ip_referrals,
           ${fanoutSql("subnet", w.subnetFanoutSince, rules.subnetFanout.maxReferees)} AS fanout_subnet_referrals,
           -- At most maxClicks + 1 index entries, whatever the address's history.
           CASE WHEN ck.ip IS NULL OR ${rules.clickVelocity.maxClicks}::int = 0 THEN 0 ELSE (
             SELECT count(*) FROM (
               SELECT 1 FROM referral_clicks vc
               WHERE vc.server_id = ck.server_id AND vc.ip = ck.ip
                 AND vc.created_at BETWEEN ck.created_at - make_interval(secs => ${w.velocitySeconds}) AND ck.created_at + make_interval(secs => ${w.velocitySeconds})
               LIMIT ${rules.clickVelocity.maxClicks + 1}::int
             ) AS near
           ) END::int AS clicks_from_ip,
           -- The referee's own hearts, counted up to minHearts: at most minHearts by identity and as many by name, each
           -- an index walk (an OR of the two would need a bitmap scan, which the planner fence rules out). The union of
           -- the two walks reaches minHearts whenever the referee has that many hearts either way.
           CASE WHEN i.stage <> 'qualified' OR ${rules.noActivity.minHearts}::int = 0 THEN 0 ELSE least((
             SELECT count(*) FROM (
               (SELECT h.id FROM hearts h
                WHERE h.server_id = ck.server_id AND h.voter_identity = i.referee AND h.counted AND h.created_at < ${now}::timestamptz
                LIMIT ${rules.noActivity.minHearts}::int)
               UNION
               (SELECT h.id FROM hearts h
                WHERE h.server_id = ck.server_id AND lower(h.username) = lower(i.referee) AND h.counted AND h.created_at < ${now}::timestamptz
                LIMIT ${rules.noActivity.minHearts}::int)
             ) AS hearts
           ), ${rules.noActivity.minHearts}::int) END::int AS referee_hearts,
           coalesce(l.signals, '{}') AS signals_before, l.signal_details AS details_before, l.review::text AS review_before
    FROM input i
    CROSS JOIN planner_restored
    JOIN referral_clicks ck ON ck.id = i.click_id
    LEFT JOIN referrals l ON l.id = i.referral_id
    CROSS JOIN LATERAL ${playerAddressesSql(Prisma.sql`i.referrer`, selfAddress)} AS rk
    CROSS JOIN LATERAL ${playerAddressesSql(Prisma.sql`i.referee`, selfAddress)} AS ek`;
}

/**
 * Hearts of one player the self-referral-by-address rule looks at: the player's latest this many on the server by
 * identity, and as many by name (a heart is the player's when its voter_identity equals the identity, or its
 * username equals it case-insensitively). A player's addresses are compared as of their recent votes, never their
 * whole history: a referrer who has voted daily for years costs the same as one who voted yesterday.
 */
export const SELF_ADDRESS_HEARTS = 50;

/**
 * The addresses and their pseudonyms of `player`'s latest hearts on the click's server (`ck`), as four arrays (ips,
 * ip_keys, subnets, subnet_keys); empty when `enabled` is false (then no hearts row is read). Reads at most
 * 2 x SELF_ADDRESS_HEARTS hearts rows, newest first down the (server_id, voter_identity, created_at) and
 * (server_id, lower(username), created_at) indexes.
 */
function playerAddressesSql(player: Prisma.Sql, enabled: boolean): Prisma.Sql {
  // The ORDER BY names the whole key of the index each branch must read ((server_id, voter_identity, created_at) and
  // (server_id, lower(username), created_at)). That alone did not hold: with statistics that made the player's rows
  // look few, a CI run planned a scan of the server's hearts and a sort (160,000 rows read); readAbuseFacts's planner
  // fence leaves the index walk as the only plan (tested under hostile costs in referral-bounded-reads).
  const latest = (match: Prisma.Sql, key: Prisma.Sql) => Prisma.sql`(
        SELECT h.ip, h.ip_key, h.subnet, h.subnet_key FROM hearts h
        WHERE ${enabled}::boolean AND h.server_id = ck.server_id AND ${match}
        ORDER BY h.server_id DESC, ${key} DESC, h.created_at DESC
        LIMIT ${SELF_ADDRESS_HEARTS}::int)`;
  return Prisma.sql`(
      SELECT array_agg(p.ip) AS ips, array_agg(p.ip_key) AS ip_keys, array_agg(p.subnet) AS subnets, array_agg(p.subnet_key) AS subnet_keys
      FROM (${latest(Prisma.sql`h.voter_identity = ${player}`, Prisma.sql`h.voter_identity`)}
            UNION ALL
            ${latest(Prisma.sql`lower(h.username) = lower(${player})`, Prisma.sql`lower(h.username)`)}) AS p
    )`;
}

/**
 * Other referees whose linked clicks came from the click's `address` (its IP or its subnet column) since `since`, as
 * their referral ids, at most `max` of them (0: the rule is off, nothing read, an empty list): their count decides
 * the fan-out rule, and when it passes, they are the earlier referees that are flagged too (backFlagsOf). Reads the partial index of linked clicks on
 * (server_id, <address>, created_at).
 *
 * Bounded: a `SELECT DISTINCT ... LIMIT max` reads every linked click from the address in the window before it
 * returns its first value (a hash or a sort consumes its whole input), and a carrier-grade NAT address can have
 * thousands. So the referees are found one at a time, walking the index newest first from where the last step
 * stopped: at most `max` steps, which together read the linked clicks of the referees they find (one per
 * registration or join a server's backend signed), plus the entry each step re-reads at its start (the one the step
 * before stopped at, kept so clicks of one millisecond are not skipped). The "seen" test is written
 * `(... = ANY(...)) IS NOT TRUE` because the planner takes `<> ALL(...)` of an unknown array as so selective that a
 * bitmap scan of the whole range and a sort look cheaper than stopping at the first index entry.
 */
function fanoutSql(address: "ip" | "subnet", since: Date, max: number): Prisma.Sql {
  const column = Prisma.raw(address);
  return Prisma.sql`CASE WHEN ck.${column} IS NULL OR ${max}::int = 0 THEN ARRAY[]::text[] ELSE (
             WITH RECURSIVE found(referees, at) AS (
               SELECT ARRAY[]::uuid[], 'infinity'::timestamptz
               UNION ALL
               SELECT f.referees || next.referral_id, next.created_at FROM found f CROSS JOIN LATERAL (
                 SELECT oc.referral_id, oc.created_at FROM referral_clicks oc
                 WHERE oc.server_id = ck.server_id AND oc.${column} = ck.${column} AND oc.referral_id IS NOT NULL
                   AND oc.created_at >= ${since}::timestamptz AND oc.created_at <= f.at
                   AND oc.referral_id IS DISTINCT FROM i.referral_id AND (oc.referral_id = ANY(f.referees)) IS NOT TRUE
                 ORDER BY oc.created_at DESC
                 LIMIT 1
               ) AS next
               WHERE cardinality(f.referees) < ${max}::int
             )
             -- The last step's list, the longest (at most max + 1 steps).
             SELECT f.referees::text[] FROM found f WHERE cardinality(f.referees) = (SELECT max(cardinality(g.referees)) FROM found g) LIMIT 1
           ) END`;
}

/** What a mint or a qualification stores: the signal codes (JSON array), their details (JSON) and the review state. */
export interface AbuseWrite {
  signals: string;
  details: string;
  review: ReviewState;
  /** The earlier referees from the same address, flagged too because this event's fan-out passed its limit. */
  backFlags: BackFlag[];
}

/**
 * An earlier referral flagged because a later referee from its click's address passed the fan-out limit (each event is
 * judged when it arrives, so the first referees of a farm would escape). It gets the signal (with the details the later
 * event saw), and the review the server's mode gives a newly flagged referral, unless it is flagged already (an owner's
 * approval or decline stands).
 */
export interface BackFlag {
  referralId: string;
  code: "ip_fanout" | "subnet_fanout";
  /** The signal's details as the later event saw them (JSON). */
  details: string;
  /** The review the referral gets when it is not flagged yet. */
  review: ReviewState;
}

/**
 * The back-flags of an event whose fan-out signal was raised: the referral ids the fan-out walk found (at most the
 * rule's maximum per signal, so at most that many referrals are updated), each with the signal. Pure.
 */
export function backFlagsOf(row: AbuseFactsRow, found: FoundSignals, mode: ReviewMode): BackFlag[] {
  const review = foldSignals({ signals: [], details: {}, review: "none" }, { codes: ["ip_fanout"], details: {} }, mode).review;
  const flags: BackFlag[] = [];
  for (const [code, ids] of [
    ["ip_fanout", row.fanout_ip_referrals],
    ["subnet_fanout", row.fanout_subnet_referrals],
  ] as const) {
    if (!found.codes.includes(code)) continue;
    const details = JSON.stringify(found.details[code] ?? {});
    for (const referralId of ids) flags.push({ referralId, code, details, review });
  }
  return flags;
}

/** The signals and review an event's write stores, from its facts. */
export function abuseWriteOf(input: AbuseFactsInput, row: AbuseFactsRow, rules: AbuseRules): AbuseWrite {
  const found = detectSignals(
    {
      stage: input.stage,
      referrerIdentity: input.referrer,
      refereeIdentity: input.referee,
      clickAddressKnown: row.click_ip_known,
      referrerSharesIp: row.shares_ip,
      referrerSharesSubnet: row.shares_subnet,
      otherRefereesFromIp: row.other_referees_ip,
      otherRefereesFromSubnet: row.other_referees_subnet,
      clicksFromIp: row.clicks_from_ip,
      refereeHearts: row.referee_hearts,
    },
    rules,
  );
  const before: ReviewRecord =
    input.stage === "registered"
      ? { signals: [], details: {}, review: "none" }
      : { signals: row.signals_before, details: row.details_before ?? {}, review: (row.review_before ?? "none") as ReviewState };
  const after = foldSignals(before, found, input.mode);
  return {
    signals: JSON.stringify(after.signals),
    details: JSON.stringify(after.details),
    review: after.review,
    backFlags: backFlagsOf(row, found, input.mode),
  };
}
