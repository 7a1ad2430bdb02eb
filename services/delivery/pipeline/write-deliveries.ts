import { Prisma } from "../../../gen/prisma/client.js";
import { DELIVERY_TRANSITIONS, type DeliveryMove, type DeliveryStatus } from "./domain/delivery-transitions.js";
import { leaseFreeSql } from "./lease.js";
import type { Tx } from "../../shared/adapters/db.js";
import type { HeldScope } from "../../servers/held-release.js";
import { oldestDueRowsSql, oldestOfAgeKey, statementRule, type RetentionRule } from "../../shared/adapters/retention-rule.js";

/**
 * Every write of `deliveries`, as SQL fragments the writers compose into their own statements (one per
 * move of DELIVERY_TRANSITIONS, domain/delivery-transitions.ts): the guard of a move (its `from` statuses
 * and its lease) is built once, by deliveryGuardSql, from the table. The consumer's insert and the test
 * callback's share insertDeliveriesSql; the dispatcher's claim (claim-deliveries.ts), the attempt log,
 * pay-once, the pull claim and redelivery use the move they make. The row is `d` in every statement.
 */

/** A status as an SQL literal of the enum (a literal, so the planner matches the partial indexes on status). */
function statusSql(status: DeliveryStatus): Prisma.Sql {
  return Prisma.raw(`'${status}'::"DeliveryStatus"`);
}

/**
 * The guard of `move` over the row `d`: its `from` statuses (literals: the partial indexes on status
 * stay usable) and the lease the table asks for: `lease` (the lease the writer took: `held`) or `now`
 * (`free`, `idle`). `TRUE` for the inserts.
 */
export function deliveryGuardSql(move: DeliveryMove, q: { lease?: Prisma.Sql; now?: Date } = {}): Prisma.Sql {
  const rule = DELIVERY_TRANSITIONS[move];
  if (rule.from === "new") return Prisma.sql`TRUE`;
  const from = rule.from as readonly DeliveryStatus[];
  const status = from.length === 1 ? Prisma.sql`d.status = ${statusSql(from[0]!)}` : Prisma.sql`d.status IN (${Prisma.join(from.map(statusSql))})`;
  switch (rule.lease) {
    case "held":
      if (q.lease === undefined) throw new Error(`delivery move ${move} needs the lease it was taken under`);
      return Prisma.sql`${status} AND d.lease_until = ${q.lease}`;
    case "free":
      if (q.now === undefined) throw new Error(`delivery move ${move} needs the time`);
      return Prisma.sql`${status} AND ${leaseFreeSql(q.now)}`;
    case "idle":
      if (q.now === undefined) throw new Error(`delivery move ${move} needs the time`);
      return Prisma.sql`${status} AND (d.lease_until IS NULL OR d.lease_until < ${q.now}::timestamptz)`;
    case "any":
      return status;
  }
}

/** The columns of a new delivery, in the order insertDeliveriesSql's `rows` gives them. */
export const DELIVERY_INSERT_COLUMNS = Prisma.raw(
  [
    "id",
    "server_id",
    "heart_id",
    "dedup_key",
    "transport",
    "endpoint_id",
    "event_type",
    "event_id",
    "payload",
    "username",
    "voter_identity",
    "period",
    "streak_day",
    "counted_at",
    "steam_id",
    "discord_id",
    "minecraft_uuid",
    "account_id",
    "next_eligible_at",
    "next_attempt_at",
    "lease_until",
    "status",
    "last_error",
    "leased_by",
    "created_at",
  ].join(", "),
);

/**
 * The one INSERT of deliveries (moves `store` and `store_withdrawn`), usable as a data-modifying CTE:
 * `rows` is a SELECT (or VALUES) of DELIVERY_INSERT_COLUMNS, in the order the rows are to be locked.
 * Idempotent per (server_id, transport, endpoint_id, dedup_key): a row already there adds nothing.
 * Returns the inserted rows (every column).
 */
export function insertDeliveriesSql(rows: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`
    INSERT INTO deliveries (${DELIVERY_INSERT_COLUMNS})
    ${rows}
    -- The unique index is NULLS NOT DISTINCT: a Votifier or pull row (no endpoint) is unique per heart too.
    ON CONFLICT (server_id, transport, endpoint_id, dedup_key) DO NOTHING
    RETURNING *`;
}

/** The status a new delivery is stored in: `store`, or `store_withdrawn` when `paidBy` (a text expression) names the transport that paid its heart. */
export function storedStatusSql(paidBy: Prisma.Sql): Prisma.Sql {
  const { store, store_withdrawn } = DELIVERY_TRANSITIONS;
  return Prisma.sql`CASE WHEN ${paidBy} IS NULL THEN ${statusSql(store.to)} ELSE ${statusSql(store_withdrawn.to)} END`;
}

/**
 * The dispatcher's lease (move `lease`: the rows of `chosen`, a FROM item with `v.id`, chosen under
 * deliveryGuardSql("lease") and locked by the caller) taken until `leaseUntil` by `workerId`; RETURNING `returning`.
 */
export function leaseDeliveriesSql(q: { chosen: Prisma.Sql; leaseUntil: Date; workerId: string | null; returning: Prisma.Sql }): Prisma.Sql {
  return Prisma.sql`
    UPDATE deliveries d SET lease_until = ${q.leaseUntil}::timestamptz, leased_by = ${q.workerId}::uuid
    FROM ${q.chosen}
    WHERE d.id = v.id
    RETURNING ${q.returning}`;
}

/** A leased delivery, as the moves under its lease name it. */
export interface HeldDelivery {
  id: string;
  leaseUntil: Date;
}

/** Move `release`: the lease given back without an attempt (nothing else changes). */
export function releaseLeaseSql(delivery: HeldDelivery): Prisma.Sql {
  return Prisma.sql`
    UPDATE deliveries d SET lease_until = NULL
    WHERE d.id = ${delivery.id}::uuid AND ${deliveryGuardSql("release", { lease: Prisma.sql`${delivery.leaseUntil}::timestamptz` })}`;
}

/** Move `defer`: the lease given back and the row due again at `nextAttemptAt`. */
export function deferDeliverySql(delivery: HeldDelivery, nextAttemptAt: Date): Prisma.Sql {
  return Prisma.sql`
    UPDATE deliveries d SET lease_until = NULL, next_attempt_at = ${nextAttemptAt}::timestamptz
    WHERE d.id = ${delivery.id}::uuid AND ${deliveryGuardSql("defer", { lease: Prisma.sql`${delivery.leaseUntil}::timestamptz` })}`;
}

/** The attempt log's results (AttemptResult kinds) and the move each makes. */
export const ATTEMPT_RESULT_MOVES = { delivered: "deliver", failed: "fail", retry: "retry", held_gone: "hold" } as const satisfies Record<string, DeliveryMove>;

/**
 * The attempt log's results under their leases (moves deliver, fail, retry, hold), as a data-modifying CTE:
 * `input` is a FROM item `i` with (id, lease_until, result, next_attempt_at, finished_at, status_code, error).
 * A row whose lease was lost is not changed. RETURNING d.id.
 */
export function recordAttemptResultsSql(input: Prisma.Sql): Prisma.Sql {
  const statusOf = Prisma.join(
    Object.entries(ATTEMPT_RESULT_MOVES).map(
      ([result, move]) => Prisma.sql`WHEN ${Prisma.raw(`'${result}'`)} THEN ${statusSql(DELIVERY_TRANSITIONS[move].to)}`,
    ),
    " ",
  );
  // The four moves share their guard (pending, under the attempt's lease: delivery-transitions.test.ts).
  return Prisma.sql`
    UPDATE deliveries d
    SET attempts = d.attempts + 1, lease_until = NULL, last_status_code = i.status_code, last_error = i.error,
        status = CASE i.result ${statusOf} ELSE d.status END,
        delivered_at = CASE WHEN i.result = 'delivered' THEN i.finished_at ELSE d.delivered_at END,
        failed_at = CASE WHEN i.result = 'failed' THEN i.finished_at ELSE d.failed_at END,
        next_attempt_at = CASE i.result WHEN 'retry' THEN i.next_attempt_at WHEN 'held_gone' THEN i.finished_at ELSE d.next_attempt_at END
    FROM ${input}
    WHERE d.id = i.id AND ${deliveryGuardSql("deliver", { lease: Prisma.sql`i.lease_until` })}
    RETURNING d.id`;
}

/**
 * Pay-once mode, as a data-modifying CTE: the counted-heart deliveries of the hearts become `withdrawn`
 * with `reason`, one attempt counted: `only` the given leased one (move `withdraw`, its lease still held),
 * or every one not in flight (move `withdraw_waiting`); never a Discord announcement. With `withEligible` (a voter's
 * erasure) every transport's, Discord's included, and their heart.eligible deliveries not sent yet too. RETURNING id, server_id.
 */
export function withdrawDeliveriesSql(q: {
  serverId: string;
  heartIds: readonly string[];
  now: Date;
  reason: string;
  only?: HeldDelivery;
  withEligible?: boolean;
}): Prisma.Sql {
  const guard = q.only
    ? Prisma.sql`d.id = ${q.only.id}::uuid AND ${deliveryGuardSql("withdraw", { lease: Prisma.sql`${q.only.leaseUntil}::timestamptz` })}`
    : deliveryGuardSql("withdraw_waiting", { now: q.now });
  // Bounded: the hearts' deliveries (a few each) by the heart_id index, then those rows by primary key. The hearts'
  // deliveries are named first by heart_id alone (a materialized lookup naming neither server nor status), the server
  // checked on them, and the write takes them by primary key: naming the server and the pending status with the heart
  // ids, the generic plan on a list's statistics (one server's share looks tiny) walked the server's pending rows and
  // filtered by heart_id (20,000 rows to withdraw one heart's delivery in delivery-bounded-reads.test.ts).
  return Prisma.sql`
    WITH named AS MATERIALIZED (
      SELECT d.id, d.server_id FROM deliveries d
      WHERE d.heart_id = ANY(${[...q.heartIds]}::uuid[])
        AND ${
          q.withEligible
            ? Prisma.sql`d.event_type IN ('heart.counted', 'heart.eligible')`
            : // Pay-once: a Discord message announces the vote and pays nothing, so it is never withdrawn (an erasure withdraws it too).
              Prisma.sql`d.event_type = 'heart.counted' AND d.transport <> 'discord'`
        })
    UPDATE deliveries d SET status = ${statusSql(DELIVERY_TRANSITIONS.withdraw.to)}, attempts = d.attempts + 1, lease_until = NULL,
        last_status_code = NULL, last_error = ${q.reason}
    WHERE d.id IN (SELECT id FROM named WHERE server_id = ${q.serverId}::uuid) AND ${guard}
    RETURNING d.id, d.server_id`;
}

/**
 * The owner's pull claim (move `claim_pull`), as a data-modifying CTE: the deliveries of `named` (an SQL set of
 * delivery ids: the claim's pull deliveries of one server, found by their unique key) that are still pending and
 * match `also` become delivered at `now`, answered `statusCode`. RETURNING id, server_id and `key` AS key.
 *
 * Rows are named by id alone, with neither server, transport nor kind: with those (and the guard's status), the
 * generic plan of a list whose pending pull deliveries are a small share of the table walked the server's pending
 * partial index and filtered by dedup key, reading the server's whole backlog per claim (bench s35). Bounded: one
 * primary-key read per named delivery.
 */
export function claimPullDeliveriesSql(q: { named: Prisma.Sql; also: Prisma.Sql; now: Date; statusCode: number; key: Prisma.Sql }): Prisma.Sql {
  return Prisma.sql`
    UPDATE deliveries d
    SET status = ${statusSql(DELIVERY_TRANSITIONS.claim_pull.to)}, delivered_at = ${q.now}::timestamptz, attempts = d.attempts + 1, lease_until = NULL,
        last_status_code = ${q.statusCode}::int, last_error = NULL
    WHERE d.id IN (${q.named}) AND ${deliveryGuardSql("claim_pull")} AND ${q.also}
    RETURNING d.id, d.server_id, ${q.key} AS key`;
}

/**
 * Redelivery (move `redeliver`): the finished deliveries matching `where` (over `d`) go back to the queue
 * with a fresh retry cycle, due at `now`; the attempt log stays. RETURNING `returning`.
 */
export function redeliverSql(where: Prisma.Sql, now: Date, returning: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`
    UPDATE deliveries d
    SET status = ${statusSql(DELIVERY_TRANSITIONS.redeliver.to)}, attempts = 0, next_attempt_at = ${now}::timestamptz, lease_until = NULL,
        failed_at = NULL, delivered_at = NULL, parked_at = NULL
    WHERE ${deliveryGuardSql("redeliver")} AND ${where}
    RETURNING ${returning}`;
}

/**
 * Move `park`: the rows `ids` that are still pending, unleased, unparked and `held` (an SQL predicate over `d`,
 * `s` its server and `e` its endpoint, read by this statement) are parked at `now`, out of the claim's index. Rows
 * another transaction has locked are skipped (the next poll sees them again). RETURNING d.id.
 */
export function parkDeliveriesSql(q: { ids: readonly string[]; now: Date; held: Prisma.Sql }): Prisma.Sql {
  return Prisma.sql`
    UPDATE deliveries SET parked_at = ${q.now}::timestamptz
    WHERE id IN (
      SELECT d.id FROM deliveries d JOIN servers s ON s.id = d.server_id LEFT JOIN callback_endpoints e ON e.id = d.endpoint_id
      WHERE d.id = ANY(${[...q.ids]}::uuid[]) AND ${deliveryGuardSql("park", { now: q.now })} AND d.parked_at IS NULL AND ${q.held}
      ORDER BY d.id
      FOR UPDATE OF d SKIP LOCKED)
    RETURNING id::text`;
}

/**
 * Move `unpark`, inside the caller's transaction (which holds the server row lock, as the park takes it FOR SHARE):
 * every parked pending row of `scope` is back in the claim's index, sendable or not (a poll parks again what is
 * still held). Through the parked rows' partial index. Returns how many.
 */
export async function unparkDeliveries(tx: Tx, scope: HeldScope): Promise<number> {
  const { unpark } = DELIVERY_TRANSITIONS;
  const rows = "endpointId" in scope ? { endpointId: scope.endpointId } : { transport: scope.transport };
  const released = await tx.delivery.updateMany({
    where: { serverId: scope.serverId, ...rows, status: { in: [...unpark.from] }, parkedAt: { not: null } },
    data: { parkedAt: null },
  });
  return released.count;
}

/**
 * A voter's erasure (services/voter-data/erase-voter-data.ts): not a move of the lifecycle (the status is kept), the
 * hearts' deliveries (index on heart_id, the hearts' progression events included) get `tombstone` as username and voter
 * identity (and in a progression event's body) and lose their platform ids, so a redelivery or a retry sends the
 * tombstone, never the erased name. The sends still waiting are withdrawn first, by
 * withdrawDeliveriesSql. Returns the rows' ids.
 */
export function eraseDeliveriesSql(q: { serverId: string; heartIds: readonly string[]; tombstone: string }): Prisma.Sql {
  return Prisma.sql`
    UPDATE deliveries d SET username = ${q.tombstone}, voter_identity = ${q.tombstone},
        steam_id = NULL, discord_id = NULL, minecraft_uuid = NULL, account_id = NULL,
        -- A progression event's body names the player too (services/rewards/domain/progression-events.ts).
        payload = CASE WHEN d.payload->>'username' IS NOT NULL THEN d.payload || jsonb_build_object('username', ${q.tombstone}::text) ELSE d.payload END
    WHERE d.server_id = ${q.serverId}::uuid AND d.heart_id = ANY(${[...q.heartIds]}::uuid[])
    RETURNING d.id`;
}

/**
 * A voter's erasure: the referral-event deliveries `ids` (by primary key) carry `tombstone` where their payload (and
 * `username`, the referee) named one of the voter's `identities` (lower-cased) as referee or referrer. Not a move: the
 * status is kept, so the other party's event is still sent, naming the tombstone. Returns the rows changed.
 */
export function eraseReferralDeliveriesSql(q: { serverId: string; ids: readonly string[]; identities: readonly string[]; tombstone: string }): Prisma.Sql {
  const ids = [...q.identities];
  return Prisma.sql`
    UPDATE deliveries d SET
        username = CASE WHEN lower(d.username) = ANY(${ids}::text[]) THEN ${q.tombstone} ELSE d.username END,
        payload = d.payload
          || CASE WHEN lower(d.payload->>'referee_identity') = ANY(${ids}::text[]) THEN jsonb_build_object('referee_identity', ${q.tombstone}::text) ELSE '{}'::jsonb END
          || CASE WHEN lower(d.payload->>'referrer_identity') = ANY(${ids}::text[]) THEN jsonb_build_object('referrer_identity', ${q.tombstone}::text) ELSE '{}'::jsonb END
    WHERE d.server_id = ${q.serverId}::uuid AND d.id = ANY(${[...q.ids]}::uuid[]) AND d.event_type LIKE 'referral.%'`;
}

/** A delivery that ended: delivered, failed or withdrawn (the predicate of deliveries_ended_age_key_idx, written as there). */
const ENDED_SQL = Prisma.sql`status <> 'pending'::"DeliveryStatus"`;

/**
 * When an ended delivery ended, the column retention keys by (ageKeySql): delivered_at, else failed_at, else created_at
 * (a withdrawn delivery records no resolution time; it was withdrawn at or after it was stored, so it ages out no later
 * than RETENTION_DELIVERY_DAYS after its heart's Kafka message was consumed, which is what the replay guard counts from).
 */
const ENDED_AT_SQL = Prisma.raw("COALESCE(delivered_at, failed_at, created_at)");

/**
 * Retention of deliveries' history (services/retention): a delivery that ended (delivered, failed or withdrawn) more
 * than `keepSeconds` ago is deleted, and its attempts with it, by the foreign key's ON DELETE CASCADE
 * (delivery_attempts_delivery_id_fkey): the delivery and its log go in one statement, an attempt is never left
 * without its delivery, and the attempts' owner module keeps every statement that writes them. A pending delivery
 * (due, retried, leased, held or parked, or a pull row not claimed yet) is never removed, whatever its age, and a
 * redelivered one is pending again (its end time cleared) until it ends anew.
 *
 * What stays true after: pay-once reads heart_payouts, never a delivery (a payout's delivery_id may name a removed
 * one); the endpoint health is its own row (callback_health), not a read of old attempts; the dashboard and the CLI
 * list fewer rows. A removed delivery's dedup key is gone, so a Kafka message replayed after it would store it again:
 * the referral service refuses RETENTION_DELIVERY_DAYS that do not outlast KAFKA_TOPIC_RETENTION_HOURS plus a day.
 */
export function endedDeliveryRetention(keepSeconds: number): RetentionRule {
  return statementRule({
    name: "ended_deliveries",
    table: "deliveries",
    keepSeconds,
    // Bounded: reads at most `limit` entries of deliveries_ended_age_key_idx (ended rows only, oldest first; never a
    // pending row) and deletes those rows by primary key (= ANY of the array: an index scan of the keys), each
    // delivery's attempts by the (delivery_id, attempt) index; rows another writer holds (a redelivery) are skipped.
    removeDue: (cutoff, limit) => Prisma.sql`
      DELETE FROM deliveries
      WHERE id = ANY(ARRAY(${oldestDueRowsSql({ table: "deliveries", columns: Prisma.raw("id"), due: ENDED_SQL, column: ENDED_AT_SQL, cut: cutoff, limit })}))
        AND ${ENDED_SQL}`,
    // One entry of deliveries_ended_age_key_idx.
    oldest: Prisma.sql`SELECT ${oldestOfAgeKey(ENDED_AT_SQL)} AS oldest FROM deliveries WHERE ${ENDED_SQL}`,
  });
}
