import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { hashVoterKey, type VoterKey } from "./voter-key.js";

/** An audit entry's action. */
export type VoterDataAction = "export" | "erase";

/** Entries per page when the caller gives no limit; the most one page may hold. */
export const DEFAULT_AUDIT_PAGE = 50;
export const MAX_AUDIT_PAGE = 500;

/** One recorded export or erasure. */
export interface VoterDataAuditEntry {
  id: string;
  action: VoterDataAction;
  principal: string;
  server_id: string | null;
  key_kind: string;
  key_hash: string;
  tombstone: string | null;
  counts: Record<string, number>;
  created_at: Date;
}

/**
 * THE writer of voter_data_audit: records an export or an erasure (who, when, what), with the voter's key hashed
 * (hashVoterKey), never in clear. An erasure's entry keeps its tombstone: the receipts of the erased hearts find it.
 */
export async function recordVoterDataAudit(
  prisma: PrismaClient,
  e: { action: VoterDataAction; principal: string; serverId: string | null; key: VoterKey; tombstone: string | null; counts: Record<string, number>; at: Date },
): Promise<string> {
  // Bounded: one row inserted.
  const [row] = await runSql<{ id: string }>(
    prisma,
    Prisma.sql`
      INSERT INTO voter_data_audit (action, principal, server_id, key_kind, key_hash, tombstone, counts, created_at)
      VALUES (${e.action}, ${e.principal}, ${e.serverId}::uuid, ${e.key.kind}, ${hashVoterKey(e.key)}, ${e.tombstone}, ${JSON.stringify(e.counts)}::jsonb, ${e.at}::timestamptz)
      RETURNING id`,
  );
  return row!.id;
}

/** An erasure's entry, once it ran: the rows it changed per table. */
export async function setVoterDataAuditCounts(prisma: PrismaClient, id: string, counts: Record<string, number>): Promise<void> {
  // Bounded: one row, by primary key.
  await runSql(prisma, Prisma.sql`UPDATE voter_data_audit SET counts = ${JSON.stringify(counts)}::jsonb WHERE id = ${id}::uuid`);
}

/** The newest entries, at most `limit` (the created_at index). */
export async function listVoterDataAudit(prisma: PrismaClient, limit: number): Promise<VoterDataAuditEntry[]> {
  const n = Math.min(limit <= 0 ? DEFAULT_AUDIT_PAGE : limit, MAX_AUDIT_PAGE);
  // Bounded: at most MAX_AUDIT_PAGE rows, the newest end of the created_at index.
  return runSql<VoterDataAuditEntry>(
    prisma,
    Prisma.sql`
      SELECT id, action, principal, server_id, key_kind, key_hash, tombstone, counts, created_at
      FROM voter_data_audit ORDER BY created_at DESC, id DESC LIMIT ${n}`,
  );
}
