import { randomUUID } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { EnvelopeSchema, type Envelope } from "../../gen/proto/events/v1/events_pb.js";
import type { Tx } from "./db.js";

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
 * `outbox`, whoever writes (writeOutbox, a CTE chain, a bulk insert): it runs inside the writing
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

/**
 * Writes an outbox row inside the caller's transaction, so the state change and
 * its event commit together. Nothing calls Kafka here; the relay publishes later, woken by the
 * commit's notification (OUTBOX_COMMITTED_CHANNEL).
 */
export async function writeOutbox(tx: Tx, event: OutboxEvent): Promise<void> {
  await tx.outboxMessage.create({ data: toOutboxRow(event) });
}
