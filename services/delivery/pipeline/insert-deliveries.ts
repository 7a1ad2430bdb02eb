import { Prisma } from "../../../gen/prisma/client.js";
import type { PrismaClient } from "../../shared/adapters/db.js";
import { runSql, type SqlTx } from "../../shared/adapters/sql/executor.js";
import { NIL_UUID, timeOrderedId } from "../../shared/values/ids.js";
import type { PlatformIds } from "../../shared/values/player-ids.js";
import type { NewDelivery, RewardCountsPayload } from "./delivery-types.js";
import { paidByTransportSql } from "../../payouts/write-payouts.js";
import { withdrawnTextSql } from "./withdraw-unpaid.js";
import {
  busyServersOf,
  claimedColumnsSql,
  fromLeasedJson,
  sendableDeliverySql,
  toClaimedDelivery,
  type ClaimedDelivery,
  type ClaimRoom,
  type LeasedJson,
} from "./claim-deliveries.js";
import { insertDeliveriesSql, storedStatusSql } from "./write-deliveries.js";

/**
 * The delivery inbox: the consumer stores each counted heart's deliveries (one statement per batch,
 * optionally leasing the new rows a dispatcher would claim next), and the test callback stores its
 * `heart.test` delivery.
 */

/** What makes a delivery of `d` unique per server, transport and endpoint. */
function dedupKeyOf(d: NewDelivery): string {
  return d.event ? d.event.eventId : d.heartId;
}

/** What inserting a delivery did. */
export type InsertOutcome = "inserted" | "duplicate" | "unknown_server";

/**
 * Inserts the deliveries of a counted heart, idempotently per (server_id, transport, endpoint, heart_id):
 * an HTTP callback per endpoint subscribed to heart.counted (the default endpoint is, unless its
 * owner unsubscribed it; held while it has no callback URL), plus a Votifier
 * delivery when the server has Votifier set up and a pull delivery when its pull API is on,
 * each decided by the server's settings at this moment. See insertDeliveries.
 */
export async function insertDelivery(prisma: PrismaClient, d: NewDelivery): Promise<InsertOutcome> {
  const [outcome] = await insertDeliveries(prisma, [d]);
  return outcome ?? "unknown_server";
}

/**
 * Inserts the deliveries of many counted hearts with ONE statement (the consumer's batch), with
 * an outcome per heart in input order. The dedup_key of a counted heart's delivery is its
 * heart_id, and `INSERT ... ON CONFLICT DO NOTHING` makes a redelivered Kafka message add
 * nothing (exactly once per receiver key, whatever the batch); joining servers makes a deleted
 * server a no-op instead of a foreign-key error. Rows go in (server, heart) order, so two
 * instances inserting overlapping batches lock in the same order. A delivery is due from when its
 * heart counted (never later than now): claims take the oldest hearts first, across servers,
 * however the batches that stored them were grouped.
 */
export async function insertDeliveries(prisma: PrismaClient, items: NewDelivery[]): Promise<InsertOutcome[]> {
  return (await insertAndLeaseDeliveries(prisma, items)).outcomes;
}

/** A lease offered with an insert: the dispatcher's room, as claimDueDeliveries takes it. */
export type InsertLease = ClaimRoom;

/** What insertAndLeaseDeliveries did: an outcome per heart, the rows it leased, and whether sendable rows were left for a claim. */
export interface InsertedDeliveries {
  outcomes: InsertOutcome[];
  /** Rows inserted already leased to the caller (as claimDueDeliveries would have claimed them). */
  leased: ClaimedDelivery[];
  /** Sendable rows were inserted without a lease (beyond the room, or none offered): a claim should run. */
  leftForClaim: boolean;
}

/**
 * insertDeliveries, and in the same statement (one commit) the new rows a dispatcher would claim
 * next are inserted already leased to it, up to `lease.limit` rows and per server its cap (`lease.capByServer`, else `lease.perServerLimit`)
 * server (minus what is in flight), with what sending needs, so a delivery stored at idle goes out
 * without a claim statement after it. Which rows are sendable is the claim's rule (sendableDeliverySql).
 * A leased row is durable with its lease, like a claimed one: if this process dies before the
 * attempt is recorded, the lease expires and any dispatcher claims it again. An event due later (`d.dueAt`: a
 * heart.eligible) is stored in the same statement, never leased, with that due time (a pull row is created then).
 */
export async function insertAndLeaseDeliveries(prisma: PrismaClient, items: NewDelivery[], lease?: InsertLease): Promise<InsertedDeliveries> {
  if (items.length === 0) return { outcomes: [], leased: [], leftForClaim: false };
  // One row per (server, heart or referral event): an item twice in one batch is a duplicate of itself.
  const byKey = new Map<string, number>();
  const unique: NewDelivery[] = [];
  const slot = items.map((d) => {
    const key = `${d.serverId}/${dedupKeyOf(d)}`;
    let i = byKey.get(key);
    if (i === undefined) {
      i = unique.push(d) - 1;
      byKey.set(key, i);
    }
    return i;
  });
  const order = unique.map((_, i) => i).sort((a, b) => compareKeys(unique[a]!, unique[b]!));
  const input = order.map((i) => {
    const d = unique[i]!;
    return {
      n: i,
      heart_id: d.heartId,
      dedup_key: dedupKeyOf(d),
      event_id: d.event?.eventId ?? null,
      payload: d.event?.payload ?? d.rewardCounts ?? null,
      server_id: d.serverId,
      event_type: d.eventType,
      username: d.username,
      voter_identity: d.voterIdentity,
      period: d.period,
      streak_day: d.streakDay,
      counted_at: d.countedAt.toISOString(),
      steam_id: d.platformIds?.steamId ?? null,
      discord_id: d.platformIds?.discordId ?? null,
      minecraft_uuid: d.platformIds?.minecraftUuid ?? null,
      account_id: d.platformIds?.accountId ?? null,
      next_eligible_at: d.nextEligibleAt?.toISOString() ?? null,
      due_at: d.dueAt?.toISOString() ?? null,
    };
  });
  const room = lease ?? { now: new Date(), leaseUntil: new Date(0), limit: 0, perServerLimit: 0, inFlightByServer: new Map<string, number>() };
  const busy = busyServersOf(room);
  const rows = await runSql<{ n: number; inserted: boolean; known: boolean; leased: LeasedJson[] | null; left_for_claim: boolean }>(
    prisma,
    Prisma.sql`
    WITH input AS (
      -- LIMIT the batch's own size: the planner takes jsonb_to_recordset for 100 rows, and for 100 rows it joined a
      -- hash of every server and every endpoint (10,000 each on a large list: 8 ms a batch) instead of looking the
      -- batch's few up by key. With the size it plans index lookups: rows read per batch, not per list.
      SELECT * FROM jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
        AS i(n int, heart_id text, dedup_key text, event_id text, payload jsonb, server_id uuid, event_type text, username text, voter_identity text, period text, streak_day int, counted_at timestamptz,
             steam_id text, discord_id text, minecraft_uuid text, account_id text, next_eligible_at timestamptz, due_at timestamptz)
      LIMIT ${input.length}::int
    ), busy AS (
      SELECT * FROM unnest(${busy.ids}::uuid[], ${busy.inFlight}::int[], ${busy.caps}::int[]) AS b(server_id, in_flight, cap)
    ), candidates AS (
      -- A callback delivery per live endpoint subscribed to the event type (held while the endpoint
      -- has no URL), a Votifier one when set up, a pull one when the pull API is on and offers the event type.
      -- A Discord message announces the vote and pays nothing: never withdrawn by pay-once.
      -- An event due later (a heart.eligible) is not sendable now: the dispatcher's claim takes it when it is due.
      SELECT i.*, d.transport, d.endpoint_id,
             ${sendableDeliverySql(room.now)} AND (paid.by IS NULL OR d.transport = 'discord') AND i.due_at IS NULL AS sendable,
             CASE WHEN d.transport <> 'discord' THEN paid.by END AS paid_by
      FROM input i
      JOIN servers s ON s.id = i.server_id
      -- Pay-once mode: a heart another transport already paid (the claim API pays from the ledger before its
      -- deliveries are stored) gets its deliveries stored withdrawn, never pending (pay-once.ts).
      CROSS JOIN LATERAL (SELECT ${paidByTransportSql(Prisma.sql`s`, Prisma.sql`i.heart_id::uuid`, Prisma.sql`i.event_type`)} AS by) paid
      CROSS JOIN LATERAL (${deliveryTargetsSql}) d
      LEFT JOIN callback_endpoints e ON e.id = d.endpoint_id
    ), offered AS (
      -- The rows a claim would take first: per server at most its room, in all at most the limit (oldest hearts first).
      SELECT c.*, c.sendable
               AND row_number() OVER (PARTITION BY c.sendable, c.server_id ORDER BY c.counted_at, c.dedup_key, c.transport, c.endpoint_id)
                   <= coalesce(b.cap, ${room.perServerLimit}::int) - coalesce(b.in_flight, 0)
               AND row_number() OVER (PARTITION BY c.sendable ORDER BY c.counted_at, c.dedup_key, c.transport, c.endpoint_id) <= ${room.limit}::int AS leased
      FROM candidates c LEFT JOIN busy b ON b.server_id = c.server_id
    ), added AS (
      ${insertDeliveriesSql(Prisma.sql`
      SELECT uuid_v7(), o.server_id, o.heart_id::uuid, o.dedup_key, o.transport, o.endpoint_id, o.event_type, o.event_id, o.payload,
             o.username, o.voter_identity, o.period, o.streak_day, o.counted_at, o.steam_id, o.discord_id, o.minecraft_uuid, o.account_id, o.next_eligible_at,
             coalesce(o.due_at, least(o.counted_at, now())), CASE WHEN o.leased THEN ${room.leaseUntil}::timestamptz END,
             ${storedStatusSql(Prisma.sql`o.paid_by`)},
             CASE WHEN o.paid_by IS NOT NULL THEN ${withdrawnTextSql(Prisma.sql`o.paid_by`)} END,
             CASE WHEN o.leased THEN ${room.workerId ?? null}::uuid END,
             ${dueCreatedAtSql(Prisma.sql`o.transport`, Prisma.sql`o.due_at`)}
      FROM offered o
      ORDER BY o.server_id, o.dedup_key, o.transport, o.endpoint_id`)}
    )
    SELECT i.n,
           EXISTS (SELECT 1 FROM added a WHERE a.server_id = i.server_id AND a.dedup_key = i.dedup_key) AS inserted,
           EXISTS (SELECT 1 FROM servers s WHERE s.id = i.server_id) AS known,
           -- The leased rows once, on the first input row only: on every row they were parsed once per row (quadratic in the batch).
           -- Bounded: per leased row, its server, endpoint and voter state by key. Each is a lateral lookup kept apart
           -- (OFFSET 0): joined plainly, the generic plan (which cannot see the batch's size) hashed the whole servers
           -- and callback_endpoints tables (5,003 and 5,004 rows read for one heart among a list's 5,000 servers in
           -- delivery-history-bounded-reads.test.ts); a lookup that names its row's key is an index probe.
           CASE WHEN i.n = ${input[0]!.n}::int THEN (SELECT json_agg(c) FROM (
              SELECT ${claimedColumnsSql(room.now)}
              FROM added d
              CROSS JOIN LATERAL (SELECT * FROM servers s WHERE s.id = d.server_id OFFSET 0) s
              LEFT JOIN LATERAL (SELECT * FROM callback_endpoints e WHERE e.id = d.endpoint_id OFFSET 0) e ON true
              LEFT JOIN LATERAL (
                SELECT * FROM voter_states v
                WHERE d.event_type = 'heart.counted' AND v.server_id = d.server_id AND v.voter_identity = d.voter_identity OFFSET 0) v ON true
              WHERE d.lease_until IS NOT NULL) c) END AS leased,
           EXISTS (SELECT 1 FROM offered o WHERE o.sendable AND NOT o.leased) AS left_for_claim
    FROM input i`,
  );
  const outcomes: InsertOutcome[] = unique.map(() => "unknown_server");
  for (const r of rows) outcomes[r.n] = r.inserted ? "inserted" : r.known ? "duplicate" : "unknown_server";
  // A repeat within the batch is a duplicate of its first copy (or, like it, of an unknown server).
  const firstSeen = new Set<number>();
  return {
    outcomes: slot.map((i) => {
      const outcome = outcomes[i] ?? "unknown_server";
      if (firstSeen.has(i)) return outcome === "unknown_server" ? outcome : "duplicate";
      firstSeen.add(i);
      return outcome;
    }),
    leased: (rows.find((r) => r.leased !== null)?.leased ?? []).map((r) => toClaimedDelivery(fromLeasedJson(r), room.now)),
    leftForClaim: rows.some((r) => r.left_for_claim),
  };
}

/**
 * A stored row's created_at: now, except a pull row of an event due later (heart.eligible), created at its due time,
 * because the pull list shows rows by created_at and must not show it before then.
 */
function dueCreatedAtSql(transport: Prisma.Sql, dueAt: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`CASE WHEN ${transport} = 'pull' THEN greatest(now(), coalesce(${dueAt}, now())) ELSE now() END`;
}

/**
 * Where an event `i` (with `i.event_type`) of server `s` goes, as rows (transport, endpoint_id): a callback delivery (a
 * Discord one for a Discord endpoint) per live endpoint subscribed to the event type, a Votifier one for a counted heart when Votifier is set up, a pull one
 * when the pull API is on and offers the event type. Reads the server's endpoints by their server index.
 */
const deliveryTargetsSql = Prisma.sql`
  SELECT CASE WHEN ce.discord_webhook_id IS NULL THEN 'callback' ELSE 'discord' END::"DeliveryTransport" AS transport, ce.id AS endpoint_id
  FROM callback_endpoints ce
  WHERE ce.server_id = s.id AND ce.deleted_at IS NULL AND i.event_type = ANY(ce.event_types)
  UNION ALL SELECT 'votifier'::"DeliveryTransport", NULL::uuid WHERE s.votifier_host IS NOT NULL AND i.event_type = 'heart.counted'
  UNION ALL SELECT 'pull'::"DeliveryTransport", NULL::uuid WHERE s.pull_enabled AND i.event_type = ANY(s.pull_event_types)`;

/**
 * Stores events with a body of their own (`d.event`: the progression events of a batch's counted hearts, their
 * heart.eligible) inside the caller's transaction `tx`, so they commit with what made them (the reward counts): one
 * delivery per target (deliveryTargetsSql), due at once or at `d.dueAt` (heart.eligible: a pull row is also listed
 * only from then, by its created_at), not leased (a dispatcher claims them), idempotent per (server, transport,
 * endpoint, event id): an event stored before adds nothing. Returns how many rows were inserted.
 */
export async function insertEventDeliveries(tx: SqlTx, items: readonly NewDelivery[]): Promise<number> {
  const input = [...items]
    .filter((d) => d.event !== undefined)
    .sort(compareKeys)
    .map((d) => ({
      heart_id: d.heartId,
      dedup_key: dedupKeyOf(d),
      event_id: d.event!.eventId,
      payload: d.event!.payload,
      server_id: d.serverId,
      event_type: d.eventType,
      username: d.username,
      voter_identity: d.voterIdentity,
      period: d.period,
      counted_at: d.countedAt.toISOString(),
      due_at: d.dueAt?.toISOString() ?? null,
    }));
  if (input.length === 0) return 0;
  // Bounded: per event its server by primary key and the server's live endpoints by callback_endpoints' server index
  // (a server has a few), one row inserted per target, each a probe of the deliveries' unique index.
  return tx.execute(
    insertDeliveriesSql(Prisma.sql`
    SELECT uuid_v7(), s.id, i.heart_id::uuid, i.dedup_key, d.transport, d.endpoint_id, i.event_type, i.event_id, i.payload,
           i.username, i.voter_identity, i.period, NULL::int, i.counted_at, NULL, NULL, NULL, NULL, NULL::timestamptz,
           coalesce(i.due_at, least(i.counted_at, now())), NULL::timestamptz, ${storedStatusSql(Prisma.sql`NULL`)}, NULL, NULL::uuid,
           ${dueCreatedAtSql(Prisma.sql`d.transport`, Prisma.sql`i.due_at`)}
    FROM (SELECT * FROM jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
            AS i(heart_id text, dedup_key text, event_id text, payload jsonb, server_id uuid, event_type text, username text, voter_identity text,
                 period text, counted_at timestamptz, due_at timestamptz)
          LIMIT ${input.length}::int) i
    JOIN servers s ON s.id = i.server_id
    CROSS JOIN LATERAL (${deliveryTargetsSql}) d
    ORDER BY s.id, i.dedup_key, d.transport, d.endpoint_id`),
  );
}

function compareKeys(a: NewDelivery, b: NewDelivery): number {
  const [x, y] = [dedupKeyOf(a), dedupKeyOf(b)];
  return a.serverId < b.serverId ? -1 : a.serverId > b.serverId ? 1 : x < y ? -1 : x > y ? 1 : 0;
}

/**
 * Stores a `heart.test` delivery (nil heart_id; dedup_key = its own id, so every test is a
 * new delivery) already leased to the caller, who makes its first attempt at once; the
 * dispatcher retries it like any other when that attempt fails.
 */
export async function insertTestDelivery(
  prisma: PrismaClient,
  t: {
    serverId: string;
    endpointId: string;
    username: string;
    period: string;
    now: Date;
    leaseUntil: Date;
    callbackUrl: string;
    standardWebhooks: boolean;
    publicKeySignatures: boolean;
    /** The endpoint's payload version. */
    payloadVersion: number;
    /** Sample ids and next eligible time a version-2 test body shows (stored, so a retry sends the same). */
    platformIds: PlatformIds;
    nextEligibleAt: Date;
    /** Sample reward counts a version-3 test body shows (stored as its payload). */
    rewardCounts: RewardCountsPayload;
  },
): Promise<ClaimedDelivery> {
  const id = timeOrderedId();
  const ids = t.platformIds;
  await runSql(
    prisma,
    insertDeliveriesSql(Prisma.sql`
    VALUES (${id}::uuid, ${t.serverId}::uuid, ${NIL_UUID}::uuid, ${id}, 'callback'::"DeliveryTransport", ${t.endpointId}::uuid, 'heart.test', NULL,
            ${JSON.stringify(t.rewardCounts)}::jsonb,
            ${t.username}, '', ${t.period}, NULL, ${t.now}::timestamptz, ${ids.steamId}, ${ids.discordId}, ${ids.minecraftUuid}, ${ids.accountId},
            ${t.nextEligibleAt}::timestamptz, ${t.now}::timestamptz, ${t.leaseUntil}::timestamptz, ${storedStatusSql(Prisma.sql`NULL`)}, NULL, NULL,
            ${t.now}::timestamptz)`),
  );
  return {
    id,
    serverId: t.serverId,
    heartId: NIL_UUID,
    eventType: "heart.test",
    username: t.username,
    voterIdentity: "",
    period: t.period,
    attempts: 0,
    leaseUntil: t.leaseUntil,
    transport: "callback",
    endpointId: t.endpointId,
    countedAt: t.now,
    event: null,
    rewardCounts: t.rewardCounts,
    platformIds: t.platformIds,
    nextEligibleAt: t.nextEligibleAt,
    payloadVersion: t.payloadVersion,
    callbackUrl: t.callbackUrl,
    standardWebhooks: t.standardWebhooks,
    publicKeySignatures: t.publicKeySignatures,
    votifier: null,
  };
}

export type { NewDelivery };
