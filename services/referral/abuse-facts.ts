import { Prisma } from "../../gen/prisma/client.js";
import { abuseWindowsAt, detectSignals, foldSignals, type AbuseRules, type ReviewMode, type ReviewRecord, type ReviewState } from "./domain/abuse-signals.js";

/**
 * The anti-abuse part of ApplyEvent's statements (services/referral/apply-event.ts), kept apart so the
 * write path's own SQL stays readable: a LATERAL subquery of the read statement (statement 1) gathers
 * the facts of each `registered` event that may mint an anchor and each `qualified` event that may
 * advance one, for servers whose review mode is not `off`; the pure rules (domain/abuse-signals.ts)
 * turn them into signals and a review state; the write statement (statement 2) stores them with the
 * mint or the qualification. No statement is added per event.
 *
 * "The referee's hearts" (and the referrer's) are hearts on the same server whose `voter_identity`
 * equals the identity, or whose `username` equals it case-insensitively.
 */

/** The columns the LATERAL part adds to each read row (all null when no facts were gathered). */
export interface AbuseFactsRow {
  abuse_mode: string | null;
  abuse_click_ip_known: boolean | null;
  abuse_shares_ip: boolean | null;
  abuse_shares_subnet: boolean | null;
  abuse_other_referees_ip: number | null;
  abuse_other_referees_subnet: number | null;
  abuse_clicks_from_ip: number | null;
  abuse_referee_hearts: number | null;
  abuse_signals_before: string[] | null;
  abuse_details_before: Record<string, unknown> | null;
  abuse_review_before: string | null;
}

/**
 * The LATERAL subquery of the read statement. It reads the outer aliases `i` (input: type, referee),
 * `c` (the token's click), `l` (the anchor the click is linked to) and `r` (the referee's anchor).
 */
export function abuseFactsSql(rules: AbuseRules, now: Date): Prisma.Sql {
  const w = abuseWindowsAt(rules, now);
  return Prisma.sql`
    SELECT s.referral_review_mode::text AS abuse_mode,
           ck.ip IS NOT NULL AS abuse_click_ip_known,
           EXISTS (
             SELECT 1 FROM hearts rh
             WHERE rh.server_id = ck.server_id AND (rh.voter_identity = who.referrer OR lower(rh.username) = lower(who.referrer))
               AND (rh.ip = ck.ip OR EXISTS (
                 SELECT 1 FROM hearts eh
                 WHERE eh.server_id = ck.server_id AND (eh.voter_identity = who.referee OR lower(eh.username) = lower(who.referee)) AND eh.ip = rh.ip))
           ) AS abuse_shares_ip,
           EXISTS (
             SELECT 1 FROM hearts rh
             WHERE rh.server_id = ck.server_id AND (rh.voter_identity = who.referrer OR lower(rh.username) = lower(who.referrer))
               AND (rh.subnet = ck.subnet OR EXISTS (
                 SELECT 1 FROM hearts eh
                 WHERE eh.server_id = ck.server_id AND (eh.voter_identity = who.referee OR lower(eh.username) = lower(who.referee)) AND eh.subnet = rh.subnet))
           ) AS abuse_shares_subnet,
           (SELECT count(DISTINCT rf.referee_identity) FROM referral_clicks oc JOIN referrals rf ON rf.id = oc.referral_id
             WHERE oc.server_id = ck.server_id AND oc.ip = ck.ip AND oc.created_at >= ${w.ipFanoutSince}::timestamptz
               AND rf.referee_identity <> who.referee)::int AS abuse_other_referees_ip,
           (SELECT count(DISTINCT rf.referee_identity) FROM referral_clicks oc JOIN referrals rf ON rf.id = oc.referral_id
             WHERE oc.server_id = ck.server_id AND oc.subnet = ck.subnet AND oc.created_at >= ${w.subnetFanoutSince}::timestamptz
               AND rf.referee_identity <> who.referee)::int AS abuse_other_referees_subnet,
           (SELECT count(*) FROM referral_clicks vc
             WHERE vc.server_id = ck.server_id AND vc.ip = ck.ip
               AND vc.created_at BETWEEN ck.created_at - make_interval(secs => ${w.velocitySeconds}) AND ck.created_at + make_interval(secs => ${w.velocitySeconds})
           )::int AS abuse_clicks_from_ip,
           CASE WHEN i.type = 'qualified' THEN (
             SELECT count(*) FROM hearts h
             WHERE h.server_id = ck.server_id AND h.counted AND (h.voter_identity = who.referee OR lower(h.username) = lower(who.referee))
               AND h.created_at < ${now}::timestamptz
           )::int ELSE 0 END AS abuse_referee_hearts,
           coalesce(l.signals, '{}') AS abuse_signals_before, l.signal_details AS abuse_details_before, l.review::text AS abuse_review_before
    FROM referral_clicks ck
    JOIN servers s ON s.id = ck.server_id
    CROSS JOIN LATERAL (
      SELECT CASE WHEN i.type = 'registered' THEN i.referee ELSE l.referee_identity END AS referee,
             CASE WHEN i.type = 'registered' THEN c.referrer_identity ELSE l.referrer_identity END AS referrer
    ) who
    WHERE ck.id = c.id AND s.referral_review_mode <> 'off'
      AND ((i.type = 'registered' AND r.id IS NULL AND i.referee IS NOT NULL) OR (i.type = 'qualified' AND l.state = 'registered'))`;
}

/** What a mint or a qualification stores: the signal codes (JSON array), their details (JSON) and the review state. */
export interface AbuseWrite {
  signals: string;
  details: string;
  review: ReviewState;
}

/**
 * The signals and review an event's write stores, from its read row: null when no facts were
 * gathered (review off, or an event that neither mints nor qualifies).
 */
export function abuseWriteOf(
  row: AbuseFactsRow | undefined,
  stage: "registered" | "qualified",
  referrer: string,
  referee: string,
  rules: AbuseRules,
): AbuseWrite | null {
  if (!row || row.abuse_mode === null) return null;
  const found = detectSignals(
    {
      stage,
      referrerIdentity: referrer,
      refereeIdentity: referee,
      clickAddressKnown: row.abuse_click_ip_known === true,
      referrerSharesIp: row.abuse_shares_ip === true,
      referrerSharesSubnet: row.abuse_shares_subnet === true,
      otherRefereesFromIp: row.abuse_other_referees_ip ?? 0,
      otherRefereesFromSubnet: row.abuse_other_referees_subnet ?? 0,
      clicksFromIp: row.abuse_clicks_from_ip ?? 0,
      refereeHearts: row.abuse_referee_hearts ?? 0,
    },
    rules,
  );
  const before: ReviewRecord =
    stage === "registered"
      ? { signals: [], details: {}, review: "none" }
      : { signals: row.abuse_signals_before ?? [], details: row.abuse_details_before ?? {}, review: (row.abuse_review_before ?? "none") as ReviewState };
  const after = foldSignals(before, found, row.abuse_mode as ReviewMode);
  return { signals: JSON.stringify(after.signals), details: JSON.stringify(after.details), review: after.review };
}
