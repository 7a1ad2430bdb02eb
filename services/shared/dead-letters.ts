import { Counter, type Registry } from "prom-client";
import type { PrismaClient, Tx } from "./db.js";

/**
 * Dead letters: outbox rows and bus messages that can never be published or decoded
 * (poison), set aside in the `dead_letters` table with their reason and original
 * bytes, so they block nothing and operators can see them (OperatorService).
 */

/** Who set a dead letter aside. */
export type DeadLetterSource = "relay" | "delivery";

/** An outbox row to move aside, with why. */
export interface PoisonRow {
  id: bigint;
  code: string;
  reason: string;
}

/** A consumed message to set aside, with why. */
export interface PoisonMessage {
  topic: string;
  partition: number;
  offset: string;
  key: string;
  value: Uint8Array;
  code: string;
  reason: string;
}

/** Longest reason stored (broker and decoder messages are short; this only bounds the column). */
const MAX_REASON_CHARS = 1_000;

/** The counter of dead letters, `dead_letters_total{source, topic, code}`, in a process's registry. */
export function createDeadLetterCounter(registry: Registry): Counter<"source" | "topic" | "code"> {
  return new Counter({
    name: "dead_letters_total",
    help: "Outbox rows and messages set aside as poison (never publishable or decodable), by source, topic and cause.",
    labelNames: ["source", "topic", "code"] as const,
    registers: [registry],
  });
}

/**
 * Moves outbox rows to `dead_letters` (source `relay`), inside the caller's
 * transaction: the copy keeps the row's topic, key, type, payload, id and creation
 * time; the outbox row is deleted. Returns the rows moved (for the metric).
 */
export async function moveOutboxRowsToDeadLetters(tx: Tx, rows: PoisonRow[]): Promise<{ topic: string; code: string }[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  const codes = rows.map((r) => r.code);
  const reasons = rows.map((r) => r.reason.slice(0, MAX_REASON_CHARS));
  const moved = await tx.$queryRaw<{ topic: string; code: string }[]>`
    INSERT INTO dead_letters (source, code, reason, topic, key, type, payload, outbox_id, outbox_created_at)
    SELECT 'relay', v.code, v.reason, o.topic, o.key, o.type, o.payload, o.id, o.created_at
    FROM outbox o JOIN unnest(${ids}::bigint[], ${codes}::text[], ${reasons}::text[]) AS v(id, code, reason) ON v.id = o.id
    ON CONFLICT (outbox_id) DO NOTHING
    RETURNING topic, code`;
  await tx.$executeRaw`DELETE FROM outbox WHERE id = ANY(${ids}::bigint[])`;
  return moved;
}

/**
 * Stores a consumed message as a dead letter (source `delivery`), idempotently per
 * (topic, partition, offset): a redelivery of the same message adds nothing.
 * Returns whether a row was added.
 */
export async function storeDeadMessage(prisma: PrismaClient, m: PoisonMessage): Promise<boolean> {
  const added = await prisma.$executeRaw`
    INSERT INTO dead_letters (source, code, reason, topic, key, payload, partition, "offset")
    VALUES ('delivery', ${m.code}, ${m.reason.slice(0, MAX_REASON_CHARS)}, ${m.topic}, ${m.key}, ${Buffer.from(m.value)}, ${m.partition}::int, ${m.offset})
    ON CONFLICT (source, topic, partition, "offset") DO NOTHING`;
  return added > 0;
}
