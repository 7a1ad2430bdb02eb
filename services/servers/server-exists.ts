import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { DomainError, unknownServer } from "../shared/rpc/errors.js";
import { isUuid } from "../shared/values/ids.js";
import { requiredText } from "../shared/values/contract.js";

/**
 * True when `serverId` names a stored server; an id that is not a uuid names none (the database is not asked). Runs
 * before most RPCs of a server (the pull API's list and claim among them), so it is one primary-key probe through the
 * executor: through the model API, Prisma's query compiler cost the pull list more CPU than the probe itself.
 */
export async function serverExists(prisma: PrismaClient, serverId: string): Promise<boolean> {
  if (!isUuid(serverId)) return false;
  // Bounded: one primary-key probe of servers.
  const rows = await runSql<{ found: boolean }>(prisma, Prisma.sql`SELECT EXISTS (SELECT 1 FROM servers WHERE id = ${serverId}::uuid) AS found`);
  return rows[0]?.found === true;
}

/** The trimmed id of an existing server; unknown_server (404 `unknown server`) otherwise, an empty id included. */
export async function requireServer(deps: { prisma: PrismaClient }, rawServerId: string): Promise<string> {
  const serverId = rawServerId.trim();
  if (!(await serverExists(deps.prisma, serverId))) throw unknownServer();
  return serverId;
}

/**
 * The trimmed id of an existing server: InvalidArgument `server_id is required` when
 * empty, 404 `unknown server` when no such server. For read-only reports of one server.
 */
export async function requireServerId(deps: { prisma: PrismaClient }, rawServerId: string): Promise<string> {
  if (rawServerId.trim() === "") throw new DomainError("invalid_argument", requiredText("server_id"));
  return requireServer(deps, rawServerId);
}
