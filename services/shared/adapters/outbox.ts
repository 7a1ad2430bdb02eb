import { randomUUID } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Prisma } from "../../../gen/prisma/client.js";
import { EnvelopeSchema, type Envelope } from "../../../gen/proto/events/v1/events_pb.js";
import type { SqlTx } from "./sql/executor.js";

/** Number of relay shards: rows of one shard are published by one relay instance at a time, in id order. */
export const RELAY_SHARDS = 16;

/** FNV-1a of the key, mod RELAY_SHARDS: one key always lands in one shard, so its order holds. */
export function shardOf(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % RELAY_SHARDS;
}

/**
 * The channel on which a transaction that writes outbox rows notifies, at its commit, that rows
 * wait (an empty payload). The `outbox_committed` trigger does it for every INSERT statement into
 * `outbox` (insertOutboxRows, alone or inside a CTE chain): it runs inside the writing
 * transaction, so the notification leaves exactly when the rows become visible, and PostgreSQL
 * folds all notifications of one transaction into one. The relay LISTENs on it (wake on commit);
 * migration 20261123141500_outbox_relay_wake creates the trigger.
 */
export const OUTBOX_COMMITTED_CHANNEL = "outbox_committed";

/** What a store passes to write an outbox row. */
export interface OutboxEvent {
  topic: string;
  type: string;
  serverId: string;
  occurredAt: Date;
  payload: Envelope["payload"];
}

/** The column values of one outbox row. */
export interface OutboxRow {
  topic: string;
  key: string;
  type: string;
  payload: Buffer<ArrayBuffer>;
  shard: number;
  createdAt: Date;
}

/** Builds the outbox row of an event (the serialized envelope with a fresh event id, and its shard). */
export function toOutboxRow(event: OutboxEvent): OutboxRow {
  const envelope = create(EnvelopeSchema, {
    eventId: randomUUID(),
    type: event.type,
    occurredAt: timestampFromDate(event.occurredAt),
    serverId: event.serverId,
    payload: event.payload,
  });
  return {
    topic: event.topic,
    key: event.serverId,
    type: event.type,
    payload: Buffer.from(toBinary(EnvelopeSchema, envelope)) as Buffer<ArrayBuffer>,
    shard: shardOf(event.serverId),
    createdAt: event.occurredAt,
  };
}

/** An outbox row and the index of the item it belongs to in a multi-row statement (its order and its condition). */
export interface IndexedOutboxRow {
  idx: number;
  row: OutboxRow;
}

/**
 * The one outbox INSERT: every writer of outbox rows uses it (writeOutbox below, and the CTE chains of
 * ApplyEvent and CastHeart as a data-modifying CTE, `queued AS (${insertOutboxRows(...)})`), so the
 * column list and the row encoding live here only. The rows travel as one array per column (the
 * payload as hex text: node-postgres sends no bytea arrays), so the SQL text is the same for any
 * number of rows. `only`, when given, is a subquery returning the `idx` values whose rows are written
 * (in a CTE chain: the items whose own conditional write won); rows are inserted in `idx` order, so
 * their ids (the relay's order within a shard) follow the items' order.
 */
export function insertOutboxRows(rows: readonly IndexedOutboxRow[], only?: Prisma.Sql): Prisma.Sql {
  const column = <T>(pick: (row: OutboxRow) => T) => rows.map((r) => pick(r.row));
  return Prisma.sql`
    INSERT INTO outbox (topic, key, type, payload, shard, created_at)
    SELECT o.topic, o.key, o.type, decode(o.payload, 'hex'), o.shard, o.created_at
    FROM unnest(
      ${rows.map((r) => r.idx)}::int[], ${column((r) => r.topic)}::text[], ${column((r) => r.key)}::text[], ${column((r) => r.type)}::text[],
      ${column((r) => r.payload.toString("hex"))}::text[], ${column((r) => r.shard)}::int[], ${column((r) => r.createdAt.toISOString())}::timestamptz[]
    ) AS o(idx, topic, key, type, payload, shard, created_at)
    ${only === undefined ? Prisma.empty : Prisma.sql`WHERE o.idx IN (${only})`}
    ORDER BY o.idx`;
}

/**
 * Writes an event's outbox row inside the caller's transaction, so the state change and its event
 * commit together. Nothing calls Kafka here; the relay publishes later, woken by the commit's notification
 * (OUTBOX_COMMITTED_CHANNEL).
 */
export async function writeOutbox(tx: SqlTx, event: OutboxEvent): Promise<void> {
  await tx.execute(insertOutboxRows([{ idx: 0, row: toOutboxRow(event) }]));
}

/**
 * A voter's erasure (services/voter-data/erase-voter-data.ts): the outbox rows `ids` that carry the erased voter and are
 * not published yet are withdrawn (deleted), so Kafka never receives the erased values. A row the relay is publishing
 * at that moment is locked by it: this waits, finds it published, and leaves it (it reached Kafka before the erasure
 * committed). By primary key: at most `ids` rows. Returns the rows deleted.
 */
export function withdrawOutboxRowsSql(ids: readonly bigint[]): Prisma.Sql {
  return Prisma.sql`DELETE FROM outbox WHERE id = ANY(${ids.map(String)}::bigint[]) AND published_at IS NULL`;
}

/**
 * A voter's erasure: the unpublished outbox row `id` gets `payload` (its envelope with the erased voter's identities
 * replaced by the tombstone), so the other party's event still goes out, never naming the voter. A row the relay is
 * publishing at that moment is locked by it: this waits, finds it published, and leaves it. By primary key: one row.
 */
export function rewriteOutboxPayloadSql(id: bigint, payload: Uint8Array): Prisma.Sql {
  return Prisma.sql`UPDATE outbox SET payload = ${Buffer.from(payload)} WHERE id = ${String(id)}::bigint AND published_at IS NULL`;
}
