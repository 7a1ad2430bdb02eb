import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { HeartCountedSchema } from "../../gen/proto/events/v1/events_pb.js";
import { HEARTS_TOPIC } from "../shared/bus.js";
import type { PrismaClient, Tx } from "../shared/db.js";
import { writeOutbox } from "../shared/outbox.js";
import type { FraudCounts, FraudWindows } from "./domain/score-heart.js";
import { HEART_COOLDOWN_MS } from "./domain/streak.js";

/** Everything stored about one cast heart. */
export interface HeartRecord {
  id: string;
  serverId: string;
  username: string;
  voterIdentity: string;
  ip: string;
  subnet: string;
  userAgent: string;
  fraudScore: number;
  fraudReasons: string[];
  period: string;
  /** The cast time; also the cooldown anchor when it counts. */
  at: Date;
}

/** How the counting transaction ended. */
export type CountOutcome = { kind: "counted"; streakDay: number } | { kind: "cooldown"; nextEligibleAt: Date };

/**
 * Counts the fraud signals for a heart (see FraudCounts); each count includes the
 * heart being cast. Identity rules look at this server only; velocity at every server.
 */
export async function countFraudSignals(
  prisma: PrismaClient,
  q: { serverId: string; voterIdentity: string; ip: string; subnet: string; windows: FraudWindows },
): Promise<FraudCounts> {
  const rows = await prisma.$queryRaw<{ ip_identities: bigint; subnet_identities: bigint; ip_hearts: bigint }[]>`
    SELECT
      (SELECT count(DISTINCT voter_identity) FROM hearts
        WHERE server_id = ${q.serverId}::uuid AND ip = ${q.ip} AND counted
          AND created_at >= ${q.windows.ipIdentitiesSince}::timestamptz AND voter_identity <> ${q.voterIdentity}) AS ip_identities,
      (SELECT count(DISTINCT voter_identity) FROM hearts
        WHERE server_id = ${q.serverId}::uuid AND subnet = ${q.subnet} AND counted
          AND created_at >= ${q.windows.subnetIdentitiesSince}::timestamptz AND voter_identity <> ${q.voterIdentity}) AS subnet_identities,
      (SELECT count(*) FROM hearts
        WHERE ip = ${q.ip} AND created_at >= ${q.windows.velocitySince}::timestamptz) AS ip_hearts`;
  const row = rows[0];
  return {
    identitiesOnIp: Number(row?.ip_identities ?? 0) + 1,
    identitiesOnSubnet: Number(row?.subnet_identities ?? 0) + 1,
    heartsFromIp: Number(row?.ip_hearts ?? 0) + 1,
  };
}

/** Records a heart that fraud scoring blocked: kept for the audit trail, never counted. */
export async function recordFraudHeart(prisma: PrismaClient, heart: HeartRecord): Promise<void> {
  await insertHeart(prisma, heart, { counted: false, verdict: "fraud", streakDay: null });
}

/**
 * Tries to count a heart, in ONE transaction. The conditional upsert on
 * voter_states decides the cooldown race: its WHERE only lets the update through
 * when the last counted heart is at least 24 h old, and the row lock serialises
 * concurrent casts, so of any number of simultaneous casts exactly one returns a
 * row. That one inserts the counted heart, bumps the ranking and writes the
 * heart.counted outbox row; the others record a cooldown heart.
 */
export async function countHeart(prisma: PrismaClient, heart: HeartRecord): Promise<CountOutcome> {
  const today = heart.at.toISOString().slice(0, 10);
  return prisma.$transaction(async (tx) => {
    const won = await tx.$queryRaw<{ streak_days: number }[]>`
      INSERT INTO voter_states (server_id, voter_identity, last_counted_at, last_day, streak_days)
      VALUES (${heart.serverId}::uuid, ${heart.voterIdentity}, ${heart.at}::timestamptz, ${today}::date, 1)
      ON CONFLICT (server_id, voter_identity) DO UPDATE SET
        last_counted_at = EXCLUDED.last_counted_at,
        last_day = EXCLUDED.last_day,
        streak_days = CASE
          WHEN voter_states.last_day = EXCLUDED.last_day - 1 THEN voter_states.streak_days + 1
          WHEN voter_states.last_day = EXCLUDED.last_day THEN voter_states.streak_days
          ELSE 1
        END
      WHERE voter_states.last_counted_at <= EXCLUDED.last_counted_at - interval '24 hours'
      RETURNING streak_days`;
    const streakDay = won[0]?.streak_days;
    if (streakDay === undefined) {
      // The conflicting row is locked by the upsert above, so this read is the state that refused us.
      const state = await tx.$queryRaw<{ last_counted_at: Date }[]>`
        SELECT last_counted_at FROM voter_states WHERE server_id = ${heart.serverId}::uuid AND voter_identity = ${heart.voterIdentity}`;
      const last = state[0]?.last_counted_at ?? heart.at;
      await insertHeart(tx, heart, { counted: false, verdict: "cooldown", streakDay: null });
      return { kind: "cooldown", nextEligibleAt: new Date(new Date(last).getTime() + HEART_COOLDOWN_MS) };
    }
    await insertHeart(tx, heart, { counted: true, verdict: "counted", streakDay });
    await tx.$executeRaw`
      INSERT INTO server_rankings (server_id, period, hearts) VALUES (${heart.serverId}::uuid, ${heart.period}, 1)
      ON CONFLICT (server_id, period) DO UPDATE SET hearts = server_rankings.hearts + 1`;
    await writeOutbox(tx, {
      topic: HEARTS_TOPIC,
      type: "heart.counted",
      serverId: heart.serverId,
      occurredAt: heart.at,
      payload: {
        case: "heartCounted",
        value: create(HeartCountedSchema, {
          heartId: heart.id,
          serverId: heart.serverId,
          username: heart.username,
          voterIdentity: heart.voterIdentity,
          period: heart.period,
          countedAt: timestampFromDate(heart.at),
          streakDay,
        }),
      },
    });
    return { kind: "counted", streakDay };
  });
}

async function insertHeart(
  db: PrismaClient | Tx,
  heart: HeartRecord,
  outcome: { counted: boolean; verdict: "counted" | "cooldown" | "fraud"; streakDay: number | null },
): Promise<void> {
  await db.heart.create({
    data: {
      id: heart.id,
      serverId: heart.serverId,
      username: heart.username,
      voterIdentity: heart.voterIdentity,
      ip: heart.ip,
      subnet: heart.subnet,
      userAgent: heart.userAgent,
      counted: outcome.counted,
      verdict: outcome.verdict,
      fraudScore: heart.fraudScore,
      fraudReasons: heart.fraudReasons,
      period: heart.period,
      streakDay: outcome.streakDay,
      createdAt: heart.at,
    },
  });
}

/** One ranking row. */
export interface RankingRow {
  serverId: string;
  hearts: number;
  rank: number;
}

/**
 * Servers by counted hearts in `period`, most first; ties share a rank (1, 2, 2, 4).
 * With `ownerId`, only that owner's servers, each keeping its overall rank.
 */
export async function readRanking(prisma: PrismaClient, period: string, limit: number, ownerId?: string): Promise<RankingRow[]> {
  const rows = await prisma.$queryRaw<{ server_id: string; hearts: number; rank: bigint }[]>`
    SELECT r.server_id::text AS server_id, r.hearts, r.rank FROM (
      SELECT server_id, hearts, rank() OVER (ORDER BY hearts DESC) AS rank
      FROM server_rankings WHERE period = ${period} AND hearts > 0
    ) r
    WHERE ${ownerId ?? null}::text IS NULL OR r.server_id IN (SELECT id FROM servers WHERE owner_id = ${ownerId ?? null}::text)
    ORDER BY r.hearts DESC, r.server_id ASC
    LIMIT ${limit}`;
  return rows.map((r) => ({ serverId: r.server_id, hearts: Number(r.hearts), rank: Number(r.rank) }));
}
