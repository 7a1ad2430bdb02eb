import type { PrismaClient } from "../shared/adapters/db.js";
import { isUniqueViolation } from "../shared/values/db-errors.js";
import { DomainError, unknownServer } from "../shared/rpc/errors.js";
import { boundField } from "../shared/values/field-rules.js";
import { isUuid } from "../shared/values/ids.js";
import type { Owner } from "../../gen/prisma/client.js";
import { WITH_DEFAULT_ENDPOINT, type ServerRecord } from "../servers/server-store.js";
import type { OwnedResource } from "./rpc-access.js";

export type { Owner as OwnerRecord };

const OWNER_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

/** Validates an owner id: the list's account id, 1-128 of letters, digits, `.`, `_`, `:`, `@`, `-`. */
export function toOwnerId(raw: string): string {
  const id = raw.trim();
  if (!OWNER_ID_PATTERN.test(id)) throw new DomainError("invalid_argument", "owner_id must be 1-128 letters, digits, '.', '_', ':', '@' or '-'");
  return id;
}

/** CreateOwner (409 when the id exists). */
export async function createOwner(prisma: PrismaClient, now: Date, input: { ownerId: string; displayName: string }): Promise<Owner> {
  const id = toOwnerId(input.ownerId);
  const displayName = boundField("display_name", input.displayName.trim());
  try {
    return await prisma.owner.create({ data: { id, displayName, createdAt: now } });
  } catch (error) {
    // Failure policy: an existing owner is the caller's mistake (409); anything else is internal.
    if (isUniqueViolation(error)) throw new DomainError("conflict", "owner already exists");
    throw error;
  }
}

/** The owner, or 404 `unknown owner`. */
export async function requireOwner(prisma: PrismaClient, rawId: string): Promise<Owner> {
  const id = rawId.trim();
  const owner = OWNER_ID_PATTERN.test(id) ? await prisma.owner.findUnique({ where: { id } }) : null;
  if (!owner) throw new DomainError("not_found", "unknown owner");
  return owner;
}

/** AssignServer: sets (or, with an empty owner id, clears) a server's owner. */
export async function assignServer(prisma: PrismaClient, rawServerId: string, rawOwnerId: string): Promise<ServerRecord> {
  const serverId = rawServerId.trim();
  const ownerId = rawOwnerId.trim() === "" ? null : (await requireOwner(prisma, rawOwnerId)).id;
  const updated = isUuid(serverId) ? await prisma.server.updateMany({ where: { id: serverId }, data: { ownerId } }) : { count: 0 };
  if (updated.count !== 1) throw unknownServer();
  return prisma.server.findUniqueOrThrow({ where: { id: serverId }, include: WITH_DEFAULT_ENDPOINT });
}

/** An owner's servers, oldest first (404 `unknown owner`). */
export async function listOwnerServers(prisma: PrismaClient, rawOwnerId: string): Promise<ServerRecord[]> {
  const owner = await requireOwner(prisma, rawOwnerId);
  return prisma.server.findMany({ where: { ownerId: owner.id }, orderBy: [{ createdAt: "asc" }, { id: "asc" }], include: WITH_DEFAULT_ENDPOINT });
}

/** What a non-owner is told about each resource: exactly what a missing one answers. */
const NOT_FOUND: Record<OwnedResource, () => DomainError> = {
  server: () => unknownServer(),
  delivery: () => new DomainError("not_found", "unknown delivery"),
  referral: () => new DomainError("not_found", "referral not found"),
};

/**
 * Throws the resource's own not-found error unless `id` names a server of `ownerId`
 * (or a delivery or referral of one). One query; ids that are not uuids name nothing.
 */
export async function requireOwned(prisma: PrismaClient, ownerId: string, resource: OwnedResource, rawId: unknown): Promise<void> {
  const id = typeof rawId === "string" ? rawId.trim() : "";
  let found = 0;
  if (isUuid(id)) {
    if (resource === "server") found = await prisma.server.count({ where: { id, ownerId } });
    else if (resource === "delivery") found = await prisma.delivery.count({ where: { id, server: { ownerId } } });
    else found = await prisma.referral.count({ where: { id, server: { ownerId } } });
  }
  if (found !== 1) throw NOT_FOUND[resource]();
}
