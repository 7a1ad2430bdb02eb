import { eraseReferralRewardEntriesSql, eraseRewardEntriesSql, eraseVoterRewardStatesSql } from "../rewards/reward-queue-store.js";
import { MAX_ENTRIES } from "../rewards/domain/reward-rules.js";
import { referralSideEntryKeys } from "../rewards/domain/rewards-for-referral.js";
import { eraseVoterPeriodTalliesSql } from "../rewards/period-store.js";
import { eraseGoalVotersSql } from "../rewards/network-goal-store.js";
import { eraseVoteRemindersSql } from "../reminders/reminder-store.js";
import { randomUUID } from "node:crypto";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { Prisma } from "../../gen/prisma/client.js";
import { type Envelope, EnvelopeSchema } from "../../gen/proto/events/v1/events_pb.js";
import { eraseVoteClaimsSql } from "../claims/write-vote-claims.js";
import { dropAttemptExchangesSql } from "../delivery/pipeline/attempt-log.js";
import { eraseVoterRoleGrantsSql } from "../voter-roles/voter-role-store.js";
import { eraseDeliveriesSql, eraseReferralDeliveriesSql, withdrawDeliveriesSql } from "../delivery/pipeline/write-deliveries.js";
import { eraseAddressVotersSql, eraseHeartsSql, eraseVoterStatesSql } from "../hearts/store.js";
import { erasePluginPlayerIdsSql } from "../plugin-activity/record-plugin-calls.js";
import { eraseReferralClicksSql, eraseReferralsSql } from "../referral/apply-event.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { dropDeadLettersSql } from "../shared/adapters/dead-letters.js";
import { rewriteOutboxPayloadSql, withdrawOutboxRowsSql } from "../shared/adapters/outbox.js";
import { executeSql, runSql, runSqlTransaction, type SqlTx } from "../shared/adapters/sql/executor.js";
import {
  findVoterRows,
  ID_BATCH,
  inBatches,
  readReferralDeliveries,
  readServerIds,
  REFERRAL_ENTRY_KEYS_BATCH,
  SCAN_PAGE,
  type VoterRows,
} from "./read-voter-rows.js";
import type { VoterKey } from "./voter-key.js";

import { TOMBSTONE_PREFIX } from "../shared/values/tombstone.js";

export { TOMBSTONE_PREFIX };

/** What a withdrawn delivery's last_error says. */
export const ERASED_DELIVERY_REASON = "withdrawn: the voter's data was erased";

/** One batch's transaction: short, so an erasure never holds locks the hot paths wait on for long. */
const ERASE_TRANSACTION = { timeoutMs: 15_000, maxWaitMs: 5_000 } as const;

/** Rows changed per table. */
export type EraseCounts = Record<string, number>;

/** What an erasure did. */
export interface Erasure {
  tombstone: string;
  counts: EraseCounts;
}

/** A new tombstone: stable for the erased voter (every row of theirs gets the same one), opaque, unlinkable to the name. */
export function newTombstone(): string {
  return `${TOMBSTONE_PREFIX}${randomUUID()}`;
}

/**
 * EraseVoterData: on `serverId` (or every server when null), the voter found by `key` is replaced by `tombstone`
 * everywhere, and their addresses and agents are dropped, in batches (one short transaction per ID_BATCH hearts,
 * referrals or clicks; every statement bounded, read-voter-rows.ts):
 *
 * - hearts keep verdict, count, period and time (rankings and counts unchanged); username and voter identity become
 *   the tombstone, platform ids, address, subnet and agent are dropped;
 * - ledger rows keep claimed/expired/withdrawn; a row still held is expired ("erased"); payouts (heart_payouts) are
 *   untouched, so a paid heart stays paid once, and a heart reserved by a push stays taken;
 * - deliveries not yet sent are withdrawn (never sent), their heart.eligible too; every delivery of the hearts carries the tombstone, and the
 *   attempts' exchanges (headers and bodies) are dropped;
 * - unpublished outbox rows: a heart's event is withdrawn (deleted), a referral event is rewritten with the tombstone,
 *   so Kafka never gets the erased values; referral-event deliveries name the tombstone in their payload; dead letters
 *   carrying the voter's events are dropped;
 * - referrals and their credits carry the tombstone as referee or referrer (state and credit kept); clicks lose their
 *   address and agent; voter_states and the identity rules' rows of the voter are deleted; plugin activity forgets the
 *   voter's ids;
 * - the reward queue's entries the voter's hearts gave are deleted (pending ones are never paid: the commands name the
 *   voter), and the reward rules' counts of the voter (voter_reward_states) are deleted;
 * - the voter's vote reminders (vote_reminders, with the address or Discord user id) are deleted;
 * - the voter's Discord voter roles lapse at once (voter_role_grants: the role job removes the role, then the row).
 *
 * Running it twice finds nothing the second time (the rows carry the tombstone, not the key).
 */
export async function eraseVoterData(prisma: PrismaClient, q: { serverId: string | null; key: VoterKey; now: Date; tombstone: string }): Promise<Erasure> {
  const counts: EraseCounts = {};
  const add = (table: string, n: number) => {
    counts[table] = (counts[table] ?? 0) + n;
  };
  for await (const serverId of readServerIds(prisma, q.serverId)) {
    const rows = await findVoterRows(prisma, serverId, q.key);
    // The outbox first: an unpublished event about the voter never reaches Kafka once its rows are erased.
    add("outbox", await eraseOutbox(prisma, serverId, rows, q.tombstone));
    add("dead_letters", await dropDeadLetters(prisma, serverId, rows));
    await eraseServer(prisma, serverId, rows, q, add);
  }
  return { tombstone: q.tombstone, counts };
}

async function eraseServer(
  prisma: PrismaClient,
  serverId: string,
  rows: VoterRows,
  q: { now: Date; tombstone: string; key: VoterKey },
  add: (table: string, n: number) => void,
): Promise<void> {
  const inTx = <T>(body: (tx: SqlTx) => Promise<T>) => runSqlTransaction(prisma, body, ERASE_TRANSACTION);
  for (const batch of inBatches(
    rows.hearts.map((h) => h.id),
    ID_BATCH,
  )) {
    await inTx(async (tx) => {
      const scope = { serverId, heartIds: batch, tombstone: q.tombstone };
      // Bounded, each: the batch's rows by primary key or the heart_id index (a handful of deliveries per heart).
      const withdrawn = await tx.query(
        Prisma.sql`WITH w AS (${withdrawDeliveriesSql({ serverId, heartIds: batch, now: q.now, reason: ERASED_DELIVERY_REASON, withEligible: true })}) SELECT id FROM w`,
      );
      add("deliveries_withdrawn", withdrawn.length);
      const deliveries = await tx.query<{ id: string }>(eraseDeliveriesSql(scope));
      add("deliveries", deliveries.length);
      for (const ids of inBatches(
        deliveries.map((d) => d.id),
        ID_BATCH,
      ))
        add("delivery_attempts", await tx.execute(dropAttemptExchangesSql(ids)));
      add("vote_claims", await tx.execute(eraseVoteClaimsSql({ ...scope, now: q.now })));
      add("reward_queue_entries", await tx.execute(eraseRewardEntriesSql({ serverId, heartIds: batch })));
      add("hearts", await tx.execute(eraseHeartsSql(scope)));
    });
  }
  const identities = [...new Set(rows.hearts.map((h) => h.voter_identity))];
  const addresses = [...new Set(rows.hearts.flatMap((h) => [h.ip, h.subnet]).filter((a): a is string => a !== null && a !== ""))];
  for (const batch of inBatches(identities, ID_BATCH)) {
    await inTx(async (tx) => {
      // Bounded: by primary key, at most a row per identity (voter_states), and per (address, identity) pair.
      add("voter_states", await tx.execute(eraseVoterStatesSql({ serverId, identities: batch })));
      add("voter_reward_states", await tx.execute(eraseVoterRewardStatesSql({ serverId, identities: batch })));
      add("voter_period_tallies", await tx.execute(eraseVoterPeriodTalliesSql({ serverId, identities: batch })));
      // The voter leaves the unpaid rounds of the server's network goals: no goal pays them after.
      add("network_goal_voters", await tx.execute(eraseGoalVotersSql({ serverId, identities: batch })));
      // The voter's e-mail vote reminder goes with them: never mailed again (docs/reminders.md).
      add("vote_reminders", await tx.execute(eraseVoteRemindersSql({ serverId, identities: batch })));
      // Their voter role lapses now: the role job removes it, then deletes the grant with the Discord id (docs/discord-roles.md).
      add("voter_role_grants", await tx.execute(eraseVoterRoleGrantsSql({ serverId, identities: batch, tombstone: q.tombstone, now: q.now })));
      for (const some of inBatches(addresses, ID_BATCH)) {
        add("heart_address_voters", await tx.execute(eraseAddressVotersSql({ serverId, addresses: some, identities: batch })));
      }
    });
  }
  // One tombstone per erased voter; a second referral of the voter as referee on the same server (another spelling of the
  // name) gets `#2`, ... (the server's referee identities are unique).
  const referrals = new Map<string, { referee: string | null; asReferrer: boolean }>();
  rows.asReferee.forEach((r, i) => referrals.set(r.id, { referee: i === 0 ? q.tombstone : `${q.tombstone}#${i + 1}`, asReferrer: false }));
  for (const r of rows.asReferrer) referrals.set(r.id, { referee: referrals.get(r.id)?.referee ?? null, asReferrer: true });
  for (const batch of inBatches([...referrals], ID_BATCH)) {
    // Bounded: the batch's referrals and credits by primary key.
    const [n] = await runSql<{ referrals: number; credits: number }>(
      prisma,
      eraseReferralsSql({
        serverId,
        ids: batch.map(([id]) => id),
        referee: batch.map(([, r]) => r.referee),
        asReferrer: batch.map(([, r]) => r.asReferrer),
        tombstone: q.tombstone,
      }),
    );
    add("referrals", n?.referrals ?? 0);
    add("referral_credits", n?.credits ?? 0);
  }
  // The voter's side of their referrals' reward entries (issue 31): their identity is the entries' player and commands.
  const sides = [...referrals].flatMap(([id, r]) => [
    ...(r.referee !== null ? referralSideEntryKeys(id, "referee", MAX_ENTRIES) : []),
    ...(r.asReferrer ? referralSideEntryKeys(id, "referrer", MAX_ENTRIES) : []),
  ]);
  for (const keys of inBatches(sides, REFERRAL_ENTRY_KEYS_BATCH))
    add("reward_queue_entries", await executeSql(prisma, eraseReferralRewardEntriesSql({ serverId, keys })));
  const referralIds = [...referrals.keys()];
  for await (const page of readReferralDeliveries(prisma, serverId, referralIds)) {
    await inTx(async (tx) => {
      // Bounded, each: the page's deliveries (at most SCAN_PAGE) by primary key, and their attempts by the (delivery_id, attempt) index.
      add("deliveries", await tx.execute(eraseReferralDeliveriesSql({ serverId, ids: page, identities: rows.identities, tombstone: q.tombstone })));
      add("delivery_attempts", await tx.execute(dropAttemptExchangesSql(page)));
    });
  }
  for (const batch of inBatches(rows.clicks, ID_BATCH)) {
    // Bounded: the batch's clicks by primary key.
    const sql = eraseReferralClicksSql({ serverId, ids: batch.map((c) => c.id), asReferrer: batch.map((c) => c.as_referrer), tombstone: q.tombstone });
    add("referral_clicks", await executeSql(prisma, sql));
  }
  const playerIds = new Set(rows.identities);
  if (q.key.kind !== "username") playerIds.add(q.key.value.toLowerCase());
  for (const h of rows.hearts) for (const id of [h.steam_id, h.discord_id, h.minecraft_uuid, h.account_id]) if (id) playerIds.add(id.toLowerCase());
  for (const batch of inBatches([...playerIds], ID_BATCH)) {
    // Bounded: the server's plugin activity rows (at most 164, MAX_PLUGIN_ACTIVITY_ROWS).
    add("plugin_activity", await executeSql(prisma, erasePluginPlayerIdsSql({ serverId, ids: batch })));
  }
}

/**
 * The unpublished outbox rows about the voter: a heart's event (heart.counted, an owner notification of the heart) is
 * withdrawn (deleted; the heart's deliveries are withdrawn too), a referral event is rewritten with the tombstone in
 * place of the voter's identity (the other party's event still goes out). A walk of the unpublished rows (the relay's
 * partial index on id WHERE published_at IS NULL) in pages of SCAN_PAGE; each envelope is decoded here. Published rows
 * are in Kafka already, and left to retention.
 */
async function eraseOutbox(prisma: PrismaClient, serverId: string, rows: VoterRows, tombstone: string): Promise<number> {
  const heartIds = new Set(rows.hearts.map((h) => h.id));
  const referralIds = new Set([...rows.asReferee, ...rows.asReferrer].map((r) => r.id));
  if (heartIds.size === 0 && referralIds.size === 0) return 0;
  const identities = new Set(rows.identities);
  let after = 0n;
  let changed = 0;
  for (;;) {
    // Bounded: at most SCAN_PAGE rows of the unpublished rows' partial index.
    const page = await runSql<{ id: bigint; key: string; payload: Uint8Array }>(
      prisma,
      Prisma.sql`SELECT id, key, payload FROM outbox WHERE published_at IS NULL AND id > ${after} ORDER BY id LIMIT ${SCAN_PAGE}`,
    );
    const withdraw: bigint[] = [];
    for (const row of page) {
      if (row.key !== serverId) continue;
      const envelope = decodeEnvelope(row.payload);
      const p = envelope?.payload;
      if (p === undefined) continue;
      if (!concernsVoter(envelope, heartIds, referralIds)) continue;
      if (p.case !== "referralTransitioned") withdraw.push(row.id);
      else {
        if (identities.has(p.value.refereeIdentity.toLowerCase())) p.value.refereeIdentity = tombstone;
        if (identities.has(p.value.referrerIdentity.toLowerCase())) p.value.referrerIdentity = tombstone;
        // Bounded: one row, by primary key.
        changed += await executeSql(prisma, rewriteOutboxPayloadSql(row.id, toBinary(EnvelopeSchema, envelope!)));
      }
    }
    // Bounded: the page's rows by primary key.
    if (withdraw.length > 0) changed += await executeSql(prisma, withdrawOutboxRowsSql(withdraw));
    if (page.length < SCAN_PAGE) return changed;
    after = page[page.length - 1]!.id;
  }
}

/**
 * The dead letters that carry the voter's events (a relay's outbox row Kafka refused, or a message the consumer set
 * aside) are dropped. A walk of the dead letters by primary key in pages of SCAN_PAGE (rare rows: the pipeline's
 * poison); each payload that decodes is matched as the outbox's are.
 */
async function dropDeadLetters(prisma: PrismaClient, serverId: string, rows: VoterRows): Promise<number> {
  const heartIds = new Set(rows.hearts.map((h) => h.id));
  const referralIds = new Set([...rows.asReferee, ...rows.asReferrer].map((r) => r.id));
  if (heartIds.size === 0 && referralIds.size === 0) return 0;
  let after = 0n;
  let dropped = 0;
  for (;;) {
    // Bounded: at most SCAN_PAGE rows, a range of the primary key.
    const page = await runSql<{ id: bigint; key: string; payload: Uint8Array }>(
      prisma,
      Prisma.sql`SELECT id, key, payload FROM dead_letters WHERE id > ${after} ORDER BY id LIMIT ${SCAN_PAGE}`,
    );
    const mine = page.filter((r) => r.key === serverId && concernsVoter(decodeEnvelope(r.payload), heartIds, referralIds)).map((r) => r.id);
    // Bounded: the page's rows by primary key.
    if (mine.length > 0) dropped += await executeSql(prisma, dropDeadLettersSql(mine));
    if (page.length < SCAN_PAGE) return dropped;
    after = page[page.length - 1]!.id;
  }
}

/** True when the envelope is about one of the voter's hearts or referrals. */
function concernsVoter(envelope: Envelope | undefined, heartIds: ReadonlySet<string>, referralIds: ReadonlySet<string>): boolean {
  const p = envelope?.payload;
  if (p === undefined) return false;
  if (p.case === "heartCounted" || p.case === "ownerNotification") return heartIds.has(p.value.heartId);
  if (p.case === "referralTransitioned") return referralIds.has(p.value.referralId);
  return false;
}

function decodeEnvelope(payload: Uint8Array): Envelope | undefined {
  try {
    return fromBinary(EnvelopeSchema, payload);
  } catch {
    // Failure policy: skip - a row that does not decode is the relay's dead letter to set aside, not a voter's row.
    return undefined;
  }
}
