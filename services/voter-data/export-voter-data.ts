import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import {
  findVoterRows,
  ID_BATCH,
  inBatches,
  REFERRAL_ENTRY_KEYS_BATCH,
  readReferralDeliveries,
  readServerIds,
  type VoterClick,
  type VoterHeart,
  type VoterReferral,
} from "./read-voter-rows.js";
import type { VoterKey } from "./voter-key.js";
import { MAX_ENTRIES } from "../rewards/domain/reward-rules.js";
import { referralSideEntryKeys } from "../rewards/domain/rewards-for-referral.js";

/** One server's part of an export. */
export interface VoterServerExport {
  serverId: string;
  /** Every heart of the voter, with its verdict (counted, cooldown, fraud), fraud score and reasons, address and agent. */
  hearts: VoterHeart[];
  /** The hearts' claim-ledger rows (vote_claims). */
  voteClaims: Record<string, unknown>[];
  /** Pay-once mode: which transport took each heart, and when it was paid (heart_payouts). */
  payouts: Record<string, unknown>[];
  /** The hearts' deliveries (callback, Votifier, pull), each with its attempts (status, time; the exchange when still kept). */
  deliveries: Record<string, unknown>[];
  /** What the voter's receipts show: one line per heart, its outcome as the receipt page says it. */
  receipts: Array<{ heartId: string; outcome: string; castAt: Date }>;
  /** The referral events (`referral.*`) sent or to be sent about the voter's referrals, with their payloads. */
  referralDeliveries: Record<string, unknown>[];
  /** The cooldown and streak rows (voter_states). */
  voterStates: Record<string, unknown>[];
  /** The reward queue's entries the voter's hearts gave (reward_queue_entries), pending or acknowledged. */
  rewardEntries: Record<string, unknown>[];
  /** The reward queue's entries of the voter's side of their referrals (referral rewards and their reversals), pending or acknowledged. */
  referralRewardEntries: Record<string, unknown>[];
  /** What the server's reward rules count for the voter (voter_reward_states: totals, the reward streak). */
  rewardStates: Record<string, unknown>[];
  /** The voter's counted votes per UTC month and ISO week that period awards rank (voter_period_tallies). */
  rewardPeriodCounts: Record<string, unknown>[];
  /** The voter's place in network goals' rounds not paid yet (network_goal_voters: who a reached round pays). */
  goalRounds: Record<string, unknown>[];
  /** The voter's Discord voter role on the server (voter_role_grants: their Discord user id, when the role lapses). */
  voterRoles: Record<string, unknown>[];
  /** The voter's vote reminder on the server (vote_reminders: its channel, the address or Discord user id, its state, when it was asked for). */
  reminders: Record<string, unknown>[];
  referralsAsReferee: VoterReferral[];
  referralsAsReferrer: VoterReferral[];
  /** Clicks the voter made (their referral's) or referred (as referrer). */
  clicks: VoterClick[];
}

/** The export document (ExportVoterData's JSON). */
export interface VoterExport {
  exportedAt: Date;
  key: VoterKey;
  /** The server asked for; null for the whole list. */
  serverId: string | null;
  /** Servers where something was found. */
  servers: VoterServerExport[];
}

const RECEIPT_OUTCOME: Record<string, string> = { counted: "counted", cooldown: "cooldown" };

/**
 * ExportVoterData: everything held about the voter (found by `key`) on `serverId`, or on every server when null, as
 * one document. Each statement is bounded (read-voter-rows.ts: walks in pages; by-id reads ID_BATCH ids at a time).
 * Rankings are per server (server_rankings), never per voter: the export has none.
 */
export async function exportVoterData(prisma: PrismaClient, q: { serverId: string | null; key: VoterKey; now: Date }): Promise<VoterExport> {
  const servers: VoterServerExport[] = [];
  for await (const serverId of readServerIds(prisma, q.serverId)) {
    const part = await exportServer(prisma, serverId, q.key);
    if (part !== null) servers.push(part);
  }
  return { exportedAt: q.now, key: q.key, serverId: q.serverId, servers };
}

/** Counts per section, for the audit row. */
export function exportCounts(doc: VoterExport): Record<string, number> {
  const counts: Record<string, number> = { servers: doc.servers.length };
  for (const s of doc.servers) {
    for (const [name, rows] of Object.entries(s)) if (Array.isArray(rows)) counts[name] = (counts[name] ?? 0) + rows.length;
  }
  return counts;
}

async function exportServer(prisma: PrismaClient, serverId: string, key: VoterKey): Promise<VoterServerExport | null> {
  const { hearts, asReferee, asReferrer, clicks } = await findVoterRows(prisma, serverId, key);
  if (hearts.length === 0 && asReferee.length === 0 && asReferrer.length === 0 && clicks.length === 0) return null;

  const part: VoterServerExport = {
    serverId,
    hearts,
    voteClaims: [],
    payouts: [],
    deliveries: [],
    receipts: hearts.map((h) => ({ heartId: h.id, outcome: RECEIPT_OUTCOME[h.verdict] ?? "not_counted", castAt: h.created_at })),
    referralDeliveries: [],
    voterStates: [],
    rewardEntries: [],
    referralRewardEntries: [],
    rewardStates: [],
    rewardPeriodCounts: [],
    goalRounds: [],
    voterRoles: [],
    reminders: [],
    referralsAsReferee: asReferee,
    referralsAsReferrer: asReferrer,
    clicks,
  };
  for (const batch of inBatches(
    hearts.map((h) => h.id),
    ID_BATCH,
  )) {
    // Bounded: at most ID_BATCH rows each, by primary key (heart_id).
    part.voteClaims.push(
      ...(await runSql<Record<string, unknown>>(
        prisma,
        Prisma.sql`
          SELECT heart_id, player_key, username_lower, steam_id, discord_id, minecraft_uuid, account_id, counted_at, expires_at,
                 claimed_at, state::text AS state, expired_reason, expired_at
          FROM vote_claims WHERE heart_id = ANY(${batch}::uuid[]) ORDER BY counted_at`,
      )),
    );
    part.payouts.push(
      ...(await runSql<Record<string, unknown>>(
        prisma,
        Prisma.sql`SELECT heart_id, transport, delivery_id, state, taken_at, paid_at FROM heart_payouts WHERE heart_id = ANY(${batch}::uuid[]) ORDER BY taken_at`,
      )),
    );
    // Bounded: the hearts' deliveries by the heart_id index: one per transport and callback endpoint of the server, a handful per heart.
    const deliveries = await runSql<Record<string, unknown> & { id: string }>(
      prisma,
      Prisma.sql`
        SELECT id, heart_id, transport::text AS transport, event_type, username, voter_identity, steam_id, discord_id, minecraft_uuid,
               account_id, period, streak_day, counted_at, status::text AS status, attempts, delivered_at, failed_at, created_at
        FROM deliveries WHERE server_id = ${serverId}::uuid AND heart_id = ANY(${batch}::uuid[]) ORDER BY created_at, id`,
    );
    for (const ids of inBatches(
      deliveries.map((d) => d.id),
      ID_BATCH,
    )) {
      // Bounded: the deliveries' attempts by the (delivery_id, attempt) index; a delivery's retries are capped by its schedule.
      const attempts = await runSql<Record<string, unknown> & { delivery_id: string }>(
        prisma,
        Prisma.sql`
          SELECT delivery_id, attempt, started_at, status_code, succeeded, error, request_body, response_body
          FROM delivery_attempts WHERE delivery_id = ANY(${ids}::uuid[]) ORDER BY delivery_id, attempt`,
      );
      for (const d of deliveries) if (ids.includes(d.id)) d.attempts_log = attempts.filter((a) => a.delivery_id === d.id);
    }
    part.deliveries.push(...deliveries);
    // Bounded: the hearts' reward entries by the (server_id, heart_id) index: the entries one vote's rules give.
    part.rewardEntries.push(
      ...(await runSql<Record<string, unknown>>(
        prisma,
        Prisma.sql`
          SELECT id, heart_id, entry_key, reason, username, steam_id, discord_id, minecraft_uuid, account_id, commands, online_only,
                 rules_version, created_at, acked_at
          FROM reward_queue_entries WHERE server_id = ${serverId}::uuid AND heart_id = ANY(${batch}::uuid[]) ORDER BY created_at, id`,
      )),
    );
  }
  // The voter's side of their referrals' reward entries: the keys each side can have (as the erasure deletes them).
  const sideKeys = [
    ...asReferee.flatMap((r) => referralSideEntryKeys(r.id, "referee", MAX_ENTRIES)),
    ...asReferrer.flatMap((r) => referralSideEntryKeys(r.id, "referrer", MAX_ENTRIES)),
  ];
  for (const keys of inBatches(sideKeys, REFERRAL_ENTRY_KEYS_BATCH)) {
    // Bounded: at most REFERRAL_ENTRY_KEYS_BATCH probes of the (server_id, entry_key) unique index.
    part.referralRewardEntries.push(
      ...(await runSql<Record<string, unknown>>(
        prisma,
        Prisma.sql`
          SELECT id, entry_key, reason, username, steam_id, discord_id, minecraft_uuid, account_id, commands, online_only,
                 rules_version, created_at, acked_at
          FROM reward_queue_entries WHERE server_id = ${serverId}::uuid AND entry_key = ANY(${keys}::text[]) ORDER BY created_at, id`,
      )),
    );
  }
  for await (const ids of readReferralDeliveries(prisma, serverId, [...new Set([...asReferee, ...asReferrer].map((r) => r.id))])) {
    // Bounded: the page's deliveries (at most SCAN_PAGE), by primary key.
    part.referralDeliveries.push(
      ...(await runSql<Record<string, unknown>>(
        prisma,
        Prisma.sql`
          SELECT id, event_type, event_id, payload, status::text AS status, attempts, delivered_at, failed_at, created_at
          FROM deliveries WHERE server_id = ${serverId}::uuid AND id = ANY(${ids}::uuid[]) ORDER BY created_at, id`,
      )),
    );
  }
  const stateIds = [...new Set(hearts.map((h) => h.voter_identity))];
  for (const batch of inBatches(stateIds, ID_BATCH)) {
    // Bounded: at most ID_BATCH rows, by primary key (server_id, voter_identity).
    part.voterStates.push(
      ...(await runSql<Record<string, unknown>>(
        prisma,
        Prisma.sql`
          SELECT voter_identity, last_counted_at, last_day, streak_days FROM voter_states
          WHERE server_id = ${serverId}::uuid AND voter_identity = ANY(${batch}::text[])`,
      )),
    );
    // Bounded: at most ID_BATCH rows, by primary key (server_id, voter_identity).
    part.rewardStates.push(
      ...(await runSql<Record<string, unknown>>(
        prisma,
        Prisma.sql`
          SELECT voter_identity, last_counted_at, total, month, month_total, week, week_total, streak_last_day, streak_days
          FROM voter_reward_states WHERE server_id = ${serverId}::uuid AND voter_identity = ANY(${batch}::text[])`,
      )),
    );
    // Bounded: per identity one range of the primary key (server_id, voter_identity, period): a row per week and month
    // the voter counted in within the retention horizon (about 70).
    part.rewardPeriodCounts.push(
      ...(await runSql<Record<string, unknown>>(
        prisma,
        Prisma.sql`
          SELECT voter_identity, period, votes, last_counted_at
          FROM voter_period_tallies WHERE server_id = ${serverId}::uuid AND voter_identity = ANY(${batch}::text[]) ORDER BY voter_identity, period`,
      )),
    );
    // Bounded: the server's goals (its network_goal_servers key range, a few), per goal and identity a range of the
    // (goal_id, voter_identity) index: a round or two each (rows leave when their round is paid).
    part.goalRounds.push(
      ...(await runSql<Record<string, unknown>>(
        prisma,
        Prisma.sql`
          SELECT v.goal_id, v.round, v.voter_identity, v.username, v.steam_id, v.discord_id, v.minecraft_uuid, v.account_id, v.last_counted_at
          FROM network_goal_servers s JOIN network_goal_voters v ON v.goal_id = s.goal_id
          WHERE s.server_id = ${serverId}::uuid AND v.voter_identity = ANY(${batch}::text[])
          ORDER BY v.goal_id, v.round`,
      )),
    );
    // Bounded: per identity a range of the (server_id, voter_identity) index: one row per Discord user the voter voted as.
    part.voterRoles.push(
      ...(await runSql<Record<string, unknown>>(
        prisma,
        Prisma.sql`
          SELECT voter_identity, discord_id, expires_at, given
          FROM voter_role_grants WHERE server_id = ${serverId}::uuid AND voter_identity = ANY(${batch}::text[])`,
      )),
    );
    // Bounded: at most ID_BATCH rows, by the (server_id, voter_identity) unique index.
    part.reminders.push(
      ...(await runSql<Record<string, unknown>>(
        prisma,
        Prisma.sql`
          SELECT voter_identity, channel, email, discord_id, state, created_at, ended_at, reminded_heart_at
          FROM vote_reminders WHERE server_id = ${serverId}::uuid AND voter_identity = ANY(${batch}::text[])`,
      )),
    );
  }
  return part;
}
