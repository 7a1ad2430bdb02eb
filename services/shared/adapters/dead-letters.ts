import { Counter, type Registry } from "prom-client";
import { Prisma } from "../../../gen/prisma/client.js";
import type { PrismaClient } from "./db.js";
import { executeSql, runSql, type SqlTx } from "./sql/executor.js";
import { statementRule, type RetentionRule } from "./retention-rule.js";

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

/**
 * The counter of dead letters, `dead_letters_total{source, topic, code}`, in a process's
 * registry; the relay and the consumer share it when they run in one process.
 */
export function createDeadLetterCounter(registry: Registry): Counter<"source" | "topic" | "code"> {
  const existing = registry.getSingleMetric("dead_letters_total");
  if (existing) return existing as Counter<"source" | "topic" | "code">;
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
export async function moveOutboxRowsToDeadLetters(tx: SqlTx, rows: PoisonRow[]): Promise<{ topic: string; code: string }[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id);
  const codes = rows.map((r) => r.code);
  const reasons = rows.map((r) => r.reason.slice(0, MAX_REASON_CHARS));
  const moved = await tx.query<{ topic: string; code: string }>(Prisma.sql`
    INSERT INTO dead_letters (source, code, reason, topic, key, type, payload, outbox_id, outbox_created_at)
    SELECT 'relay', v.code, v.reason, o.topic, o.key, o.type, o.payload, o.id, o.created_at
    FROM outbox o JOIN unnest(${ids}::bigint[], ${codes}::text[], ${reasons}::text[]) AS v(id, code, reason) ON v.id = o.id
    ON CONFLICT (outbox_id) DO NOTHING
    RETURNING topic, code`);
  await tx.query(Prisma.sql`DELETE FROM outbox WHERE id = ANY(${ids}::bigint[])`);
  return moved;
}

/**
 * Stores a consumed message as a dead letter (source `delivery`), idempotently per
 * (topic, partition, offset): a redelivery of the same message adds nothing.
 * Returns whether a row was added.
 */
export async function storeDeadMessage(prisma: PrismaClient, m: PoisonMessage): Promise<boolean> {
  const added = await executeSql(
    prisma,
    Prisma.sql`
      INSERT INTO dead_letters (source, code, reason, topic, key, payload, partition, "offset")
      VALUES ('delivery', ${m.code}, ${m.reason.slice(0, MAX_REASON_CHARS)}, ${m.topic}, ${m.key}, ${Buffer.from(m.value)}, ${m.partition}::int, ${m.offset})
      ON CONFLICT (source, topic, partition, "offset") DO NOTHING`,
  );
  return added > 0;
}

/** Dead letters per page when the caller gives no limit, and the most one page may hold. */
export const DEFAULT_DEAD_LETTER_PAGE = 50;
export const MAX_DEAD_LETTER_PAGE = 500;
/** Bytes of the original payload shown in a listing (the whole payload may be megabytes). */
export const DEAD_LETTER_PREVIEW_BYTES = 256;

/** One dead letter as listed: the original payload's size and first bytes, not the whole payload. */
export interface DeadLetterSummary {
  id: bigint;
  source: string;
  code: string;
  reason: string;
  topic: string;
  key: string;
  type: string | null;
  payloadSize: number;
  payloadPreview: Uint8Array;
  outboxId: bigint | null;
  outboxCreatedAt: Date | null;
  partition: number | null;
  offset: string | null;
  createdAt: Date;
}

/** Lists dead letters newest first (optionally of one source, below an id), and how many match in all. */
export async function listDeadLetters(
  prisma: PrismaClient,
  q: { source?: DeadLetterSource; limit: number; beforeId?: bigint },
): Promise<{ items: DeadLetterSummary[]; total: number }> {
  const source = q.source ?? null;
  const beforeId = q.beforeId ?? null;
  // Column aliases are the summary's field names, so the rows are the summaries.
  const items = await runSql<DeadLetterSummary>(
    prisma,
    Prisma.sql`
      SELECT id, source, code, reason, topic, key, type, octet_length(payload) AS "payloadSize",
             substring(payload FROM 1 FOR ${DEAD_LETTER_PREVIEW_BYTES}::int) AS "payloadPreview",
             outbox_id AS "outboxId", outbox_created_at AS "outboxCreatedAt", partition, "offset", created_at AS "createdAt"
      FROM dead_letters
      WHERE (${source}::text IS NULL OR source = ${source}::text) AND (${beforeId}::bigint IS NULL OR id < ${beforeId}::bigint)
      ORDER BY id DESC
      LIMIT ${q.limit}::int`,
  );
  const [count] = await runSql<{ n: bigint }>(
    prisma,
    Prisma.sql`SELECT count(*) AS n FROM dead_letters WHERE ${source}::text IS NULL OR source = ${source}::text`,
  );
  return { total: Number(count?.n ?? 0), items };
}

/**
 * Retention of dead letters (services/retention): a dead letter older than `keepSeconds` is removed (the
 * operator had that long to read, replay or drop it; the `dead_letters_total` counter keeps the count).
 */
export function deadLetterRetention(keepSeconds: number): RetentionRule {
  return statementRule({
    name: "dead_letters",
    table: "dead_letters",
    keepSeconds,
    // Reads at most `limit` entries of the created_at index and their rows; deletes those.
    removeDue: (cut, limit) => Prisma.sql`DELETE FROM dead_letters WHERE created_at < ${cut}::timestamptz AND id IN (
      SELECT id FROM dead_letters WHERE created_at < ${cut}::timestamptz ORDER BY created_at LIMIT ${limit}::int)`,
    // One entry of the created_at index.
    oldest: Prisma.sql`SELECT min(created_at) AS oldest FROM dead_letters`,
  });
}

/**
 * A voter's erasure (services/voter-data/erase-voter-data.ts): the dead letters `ids` (set aside events that carry the
 * erased voter) are dropped, so no stored copy names the voter. By primary key: at most `ids` rows.
 */
export function dropDeadLettersSql(ids: readonly bigint[]): Prisma.Sql {
  return Prisma.sql`DELETE FROM dead_letters WHERE id = ANY(${ids.map(String)}::bigint[])`;
}
