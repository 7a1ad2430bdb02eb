import { Prisma } from "../../gen/prisma/client.js";
import { requireServer } from "../servers/server-exists.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { DomainError } from "../shared/rpc/errors.js";
import { isUuid } from "../shared/values/ids.js";
import { periodRange } from "../shared/values/period.js";
import type { AnchorState } from "./domain/transitions.js";
import { COUNTED_REVIEWS } from "./domain/abuse-signals.js";
import { monthText, notNegativeText } from "../shared/values/contract.js";

/** Leaderboard rows returned when the caller sets no limit. */
export const DEFAULT_LEADERBOARD_LIMIT = 50;
/** Largest leaderboard page; larger requests are clamped. */
export const MAX_LEADERBOARD_LIMIT = 500;

/** One stored referral anchor. */
export interface ReferralRecord {
  id: string;
  serverId: string;
  refereeIdentity: string;
  referrerIdentity: string;
  state: AnchorState;
  registeredAt: Date;
  qualifiedAt: Date | null;
  reversedAt: Date | null;
  /** R1: the reversal's reason (null when none was sent) and, for `other`, the text as sent. */
  reversalReason: string | null;
  reversalReasonText: string | null;
  /** R3: set when the reversal came after the lock period (the credit stayed counted). */
  clawbackAt: Date | null;
}

/** Returns one referral by id (404 `referral not found`). */
export async function getReferral(deps: CoreDeps, referralId: string): Promise<ReferralRecord> {
  const id = referralId.trim();
  const row = isUuid(id) ? await deps.prisma.referral.findUnique({ where: { id } }) : null;
  if (!row) throw new DomainError("not_found", "referral not found");
  return {
    id: row.id,
    serverId: row.serverId,
    refereeIdentity: row.refereeIdentity,
    referrerIdentity: row.referrerIdentity,
    state: row.state,
    registeredAt: row.registeredAt,
    qualifiedAt: row.qualifiedAt,
    reversedAt: row.reversedAt,
    reversalReason: row.reversalReason,
    reversalReasonText: row.reversalReasonText,
    clawbackAt: row.clawbackAt,
  };
}

/** One leaderboard row. */
export interface LeaderboardRow {
  referrerIdentity: string;
  credits: number;
  reversed: number;
  rank: number;
  /** Of `credits`, those reversed after the lock period (clawback records; still counted). */
  clawbacks: number;
}

/**
 * Ranks a server's referrers by live credits (qualified, not reversed), with
 * their reversed credits on record. Only credits of unflagged or approved referrals count
 * (anti-abuse review, docs/referral-rules.md): a held or declined referral's credit is left out. `period` "YYYY-MM" selects credits whose
 * qualification fell in that UTC month; empty means all time. Ties share a rank
 * (1, 1, 3); within a rank rows are ordered by referrer identity. Referrers
 * whose credits were all reversed are listed with 0 credits. One SQL aggregate. All time is the credits still kept: a
 * referral and its credit go RETENTION_REFERRAL_DAYS after its last change (endedReferralRetention, apply-event.ts).
 */
export async function getLeaderboard(deps: CoreDeps, input: { serverId: string; period: string; limit: number }): Promise<LeaderboardRow[]> {
  const serverId = await requireServer(deps, input.serverId);
  const period = input.period.trim();
  if (period !== "" && !periodRange(period)) throw new DomainError("invalid_argument", monthText("period"));
  if (input.limit < 0) throw new DomainError("invalid_argument", notNegativeText("limit"));
  const limit = input.limit === 0 ? DEFAULT_LEADERBOARD_LIMIT : Math.min(input.limit, MAX_LEADERBOARD_LIMIT);
  const rows = await runSql<{ referrer_identity: string; credits: bigint; reversed: bigint; rank: bigint; clawbacks: bigint }>(
    deps.prisma,
    Prisma.sql`
      SELECT referrer_identity, credits, reversed, clawbacks, RANK() OVER (ORDER BY credits DESC) AS rank
      FROM (
        SELECT referrer_identity,
               count(*) FILTER (WHERE reversed_at IS NULL) AS credits,
               count(*) FILTER (WHERE reversed_at IS NOT NULL) AS reversed,
               count(clawback_at) AS clawbacks
        FROM referral_credits
        WHERE server_id = ${serverId}::uuid AND (${period} = '' OR period = ${period})
          AND referral_id IN (SELECT id FROM referrals WHERE server_id = ${serverId}::uuid AND review::text = ANY(${COUNTED_REVIEWS}::text[]))
        GROUP BY referrer_identity
      ) totals
      ORDER BY credits DESC, referrer_identity ASC
      LIMIT ${limit}`,
  );
  return rows.map((r) => ({
    referrerIdentity: r.referrer_identity,
    credits: Number(r.credits),
    reversed: Number(r.reversed),
    rank: Number(r.rank),
    clawbacks: Number(r.clawbacks),
  }));
}

/** Funnel counts and rates for a server. */
export interface Funnel {
  clicks: number;
  registered: number;
  qualified: number;
  reversed: number;
  clickToRegisterRate: number;
  registerToQualifyRate: number;
  reversalRate: number;
  /** Reversals after the lock period (counted in `reversed`; their credits stayed counted). */
  clawbacks: number;
  /** The reversal records of the period by reason ("" when none was sent), most frequent first. */
  reversalsByReason: Array<{ reason: string; count: number; clawbacks: number }>;
}

/**
 * The referral funnel of a server: clicks, anchors created (registered),
 * credits (qualified, including later reversed ones) and reversed anchors.
 * `period` "YYYY-MM" counts each by the UTC month of its own timestamp (click
 * time, registration, qualification, reversal). The reversals are also listed by reason, with the
 * clawbacks among them (the records a reversal leaves). One SQL statement of aggregates. It counts the rows still kept:
 * clicks and referrals age out (RETENTION_CLICK_DAYS, RETENTION_REFERRAL_DAYS), so an all-time funnel covers about those horizons.
 */
export async function getFunnel(deps: CoreDeps, input: { serverId: string; period: string }): Promise<Funnel> {
  const serverId = await requireServer(deps, input.serverId);
  const period = input.period.trim();
  const range = period === "" ? null : periodRange(period);
  if (period !== "" && !range) throw new DomainError("invalid_argument", monthText("period"));
  // An all-time funnel uses a range wider than any stored timestamp.
  const from = range?.start ?? new Date(Date.UTC(1970, 0, 1));
  const to = range?.end ?? new Date(Date.UTC(9999, 0, 1));
  const [row] = await runSql<{
    clicks: bigint;
    registered: bigint;
    qualified: bigint;
    reversed: bigint;
    by_reason: Array<{ reason: string; count: number; clawbacks: number }> | null;
  }>(
    deps.prisma,
    Prisma.sql`
      SELECT
        (SELECT count(*) FROM referral_clicks
          WHERE server_id = ${serverId}::uuid AND created_at >= ${from} AND created_at < ${to}) AS clicks,
        (SELECT count(*) FROM referrals
          WHERE server_id = ${serverId}::uuid AND registered_at >= ${from} AND registered_at < ${to}) AS registered,
        (SELECT count(*) FROM referral_credits
          WHERE server_id = ${serverId}::uuid AND credited_at >= ${from} AND credited_at < ${to}) AS qualified,
        (SELECT count(*) FROM referrals
          WHERE server_id = ${serverId}::uuid AND state = 'reversed'::"ReferralState"
            AND reversed_at >= ${from} AND reversed_at < ${to}) AS reversed,
        (SELECT json_agg(json_build_object('reason', reason, 'count', n, 'clawbacks', c) ORDER BY n DESC, reason) FROM (
          SELECT coalesce(reversal_reason, '') AS reason, count(*) AS n, count(clawback_at) AS c FROM referrals
          WHERE server_id = ${serverId}::uuid AND state = 'reversed'::"ReferralState"
            AND reversed_at >= ${from} AND reversed_at < ${to}
          GROUP BY 1) per_reason) AS by_reason`,
  );
  const clicks = Number(row?.clicks ?? 0n);
  const registered = Number(row?.registered ?? 0n);
  const qualified = Number(row?.qualified ?? 0n);
  const reversed = Number(row?.reversed ?? 0n);
  const reversalsByReason = (row?.by_reason ?? []).map((r) => ({ reason: r.reason, count: Number(r.count), clawbacks: Number(r.clawbacks) }));
  return {
    clicks,
    registered,
    qualified,
    reversed,
    clickToRegisterRate: ratio(registered, clicks),
    registerToQualifyRate: ratio(qualified, registered),
    reversalRate: ratio(reversed, qualified),
    clawbacks: reversalsByReason.reduce((sum, r) => sum + r.clawbacks, 0),
    reversalsByReason,
  };
}

function ratio(part: number, whole: number): number {
  return whole === 0 ? 0 : part / whole;
}
