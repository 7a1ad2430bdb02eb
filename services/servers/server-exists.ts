import type { PrismaClient, Tx } from "../shared/adapters/db.js";
import { DomainError, unknownServer } from "../shared/rpc/errors.js";
import { isUuid } from "../shared/values/ids.js";
import { requiredText } from "../shared/values/contract.js";

/** True when `serverId` names a stored server; an id that is not a uuid names none (the database is not asked). */
export async function serverExists(prisma: PrismaClient | Tx, serverId: string): Promise<boolean> {
  return isUuid(serverId) && (await prisma.server.count({ where: { id: serverId } })) === 1;
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
