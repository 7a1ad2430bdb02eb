import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { DomainError } from "../shared/rpc/errors.js";
import { betweenText } from "../shared/values/contract.js";
import { NIL_UUID } from "../shared/values/ids.js";
import { decodePageCursor, encodePageCursor } from "../shared/values/page-cursor.js";

/** Ids per page when the caller gives no limit. */
export const DEFAULT_SERVER_IDS_PAGE = 1_000;
/** The most ids one page may hold. */
export const MAX_SERVER_IDS_PAGE = 5_000;
/**
 * After the last page the cursor steps back this far before the newest server listed: `created_at` is
 * stamped before the server's row commits, so a server that committed after a newer one was listed is
 * still listed by the next call (a CreateServer call lasts milliseconds).
 */
export const SERVER_IDS_CURSOR_OVERLAP_MS = 60_000;

/** One page of ListServerIds. */
export interface ServerIdsPage {
  serverIds: string[];
  nextCursor: string;
  /** The page was full: more follow at once. */
  more: boolean;
}

/**
 * ListServerIds, for the gateway's list of the server ids that exist (gateway/server-directory.ts): every
 * server's id, oldest first by (created_at, id), after `cursor` (the same opaque (created_at, id) cursor as
 * the pull lists). Reads at most `limit` rows through the (created_at, id) index. After the last page the
 * cursor steps back SERVER_IDS_CURSOR_OVERLAP_MS before the newest server listed, so a caller that keeps
 * calling with it sees every server, a late-committed one included (ids listed twice are harmless).
 */
export async function listServerIds(deps: { prisma: PrismaClient }, q: { cursor: string; limit: number }): Promise<ServerIdsPage> {
  const limit = toServerIdsLimit(q.limit);
  const after = q.cursor === "" ? { createdAt: new Date(0), id: NIL_UUID } : decodePageCursor(q.cursor);
  // Bounded: at most `limit` rows, a range of the servers (created_at, id) index.
  const rows = await runSql<{ id: string; created_at: Date }>(
    deps.prisma,
    Prisma.sql`
      SELECT id::text AS id, created_at FROM servers
      WHERE (created_at, id) > (${after.createdAt}::timestamptz, ${after.id}::uuid)
      ORDER BY created_at, id
      LIMIT ${limit}`,
  );
  const last = rows[rows.length - 1];
  const more = rows.length === limit;
  if (last === undefined) return { serverIds: [], nextCursor: q.cursor, more: false };
  const newest = last.created_at;
  const next = more ? { createdAt: newest, id: last.id } : { createdAt: new Date(newest.getTime() - SERVER_IDS_CURSOR_OVERLAP_MS), id: NIL_UUID };
  return { serverIds: rows.map((r) => r.id), nextCursor: encodePageCursor(next), more };
}

/** The page size: 0 means the default; 1..MAX_SERVER_IDS_PAGE otherwise. */
function toServerIdsLimit(limit: number): number {
  if (limit === 0) return DEFAULT_SERVER_IDS_PAGE;
  if (!Number.isInteger(limit) || limit < 0 || limit > MAX_SERVER_IDS_PAGE)
    throw new DomainError("invalid_argument", betweenText("limit", 1, MAX_SERVER_IDS_PAGE));
  return limit;
}
