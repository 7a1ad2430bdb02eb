import type { PrismaClient } from "../shared/adapters/db.js";
import { Prisma } from "../../gen/prisma/client.js";
import { statementRule, type RetentionRule } from "../shared/adapters/retention-rule.js";
import { DomainError } from "../shared/rpc/errors.js";
import { generateLoginToken, generateSessionToken, hashToken } from "../shared/runtime/secrets.js";
import type { DashboardSession, Owner } from "../../gen/prisma/client.js";
import { isUuid } from "../shared/values/ids.js";
import { DASHBOARD_LOGIN_PATH } from "../shared/values/wire.js";
import { requireOwner } from "./owners.js";

export type { DashboardSession as DashboardSessionRecord };

/** Default lifetime of a login link. */
export const LOGIN_LINK_TTL_SECONDS = 300;
/** Longest lifetime a login link may be given. */
export const MAX_LOGIN_LINK_TTL_SECONDS = 3_600;
/** Lifetime of a dashboard session (the cookie's Max-Age). */
export const DASHBOARD_SESSION_TTL_SECONDS = 12 * 3_600;
/** Path of the login link on the public gateway (services/shared/values/wire.ts is its home). */
export { DASHBOARD_LOGIN_PATH } from "../shared/values/wire.js";

/**
 * CreateDashboardLoginLink: a one-time URL for one owner, valid `ttlSeconds`
 * (0: LOGIN_LINK_TTL_SECONDS). Only the token's SHA-256 is stored.
 */
export async function createLoginLink(
  prisma: PrismaClient,
  now: Date,
  input: { ownerId: string; ttlSeconds: number; publicBaseUrl: string },
): Promise<{ url: string; expiresAt: Date }> {
  const owner = await requireOwner(prisma, input.ownerId);
  if (!Number.isSafeInteger(input.ttlSeconds) || input.ttlSeconds < 0 || input.ttlSeconds > MAX_LOGIN_LINK_TTL_SECONDS) {
    throw new DomainError("invalid_argument", `ttl_seconds must be 0 (default ${LOGIN_LINK_TTL_SECONDS}) to ${MAX_LOGIN_LINK_TTL_SECONDS}`);
  }
  const token = generateLoginToken();
  const expiresAt = new Date(now.getTime() + (input.ttlSeconds === 0 ? LOGIN_LINK_TTL_SECONDS : input.ttlSeconds) * 1000);
  await prisma.dashboardLoginLink.create({ data: { ownerId: owner.id, tokenHash: hashToken(token), createdAt: now, expiresAt } });
  const url = new URL(DASHBOARD_LOGIN_PATH, input.publicBaseUrl);
  url.searchParams.set("token", token);
  return { url: url.toString(), expiresAt };
}

/**
 * RedeemDashboardLoginLink: marks the link used (a conditional update decides a race
 * between two redemptions) and opens a session, in one transaction. An unknown,
 * expired or used link is 404 with one message for all three.
 */
export async function redeemLoginLink(prisma: PrismaClient, now: Date, loginToken: string): Promise<{ sessionToken: string; session: DashboardSession }> {
  const tokenHash = hashToken(loginToken.trim());
  const sessionToken = generateSessionToken();
  const session = await prisma.$transaction(async (tx) => {
    const used = await tx.dashboardLoginLink.updateMany({ where: { tokenHash, usedAt: null, expiresAt: { gt: now } }, data: { usedAt: now } });
    if (used.count !== 1) return undefined;
    const link = await tx.dashboardLoginLink.findUniqueOrThrow({ where: { tokenHash } });
    return tx.dashboardSession.create({
      data: {
        ownerId: link.ownerId,
        tokenHash: hashToken(sessionToken),
        createdAt: now,
        expiresAt: new Date(now.getTime() + DASHBOARD_SESSION_TTL_SECONDS * 1000),
      },
    });
  });
  if (!session) throw new DomainError("not_found", "this login link is invalid or expired or already used (ask for a new one)");
  return { sessionToken, session };
}

/** The live (unexpired, unrevoked) session of a token with its owner, or undefined. */
export async function findLiveSession(prisma: PrismaClient, now: Date, sessionToken: string): Promise<{ session: DashboardSession; owner: Owner } | undefined> {
  if (sessionToken === "") return undefined;
  const row = await prisma.dashboardSession.findUnique({ where: { tokenHash: hashToken(sessionToken) }, include: { owner: true } });
  if (!row || row.revokedAt || row.expiresAt <= now) return undefined;
  const { owner, ...session } = row;
  return { session, owner };
}

/** EndDashboardSession: the owner signs out (idempotent). */
export async function endSession(prisma: PrismaClient, now: Date, sessionToken: string): Promise<void> {
  await prisma.dashboardSession.updateMany({ where: { tokenHash: hashToken(sessionToken), revokedAt: null }, data: { revokedAt: now } });
}

/** ListDashboardSessions: an owner's sessions, newest first (404 `unknown owner`). */
export async function listSessions(prisma: PrismaClient, ownerId: string): Promise<DashboardSession[]> {
  const owner = await requireOwner(prisma, ownerId);
  return prisma.dashboardSession.findMany({ where: { ownerId: owner.id }, orderBy: [{ createdAt: "desc" }, { id: "asc" }] });
}

/** RevokeDashboardSessions: one session of the owner (`sessionId`) or all of them; returns how many were live. */
export async function revokeSessions(prisma: PrismaClient, now: Date, input: { ownerId: string; sessionId: string }): Promise<number> {
  const owner = await requireOwner(prisma, input.ownerId);
  const sessionId = input.sessionId.trim();
  if (sessionId !== "" && !isUuid(sessionId)) throw new DomainError("not_found", "unknown session");
  const changed = await prisma.dashboardSession.updateMany({
    where: { ownerId: owner.id, revokedAt: null, ...(sessionId === "" ? {} : { id: sessionId }) },
    data: { revokedAt: now },
  });
  return changed.count;
}

/** The access tables retention removes expired rows from: one-time login links and dashboard sessions. */
export type ExpiredAccessTable = "dashboard_login_links" | "dashboard_sessions";

/**
 * Retention of login links and sessions (services/retention): a row of `table` expired more than `marginSeconds`
 * ago is removed, used or revoked or not (an expired link or session is refused either way; the margin keeps it
 * readable for a support question). The rule is named after its table.
 */
export function expiredAccessRetention(table: ExpiredAccessTable, marginSeconds: number): RetentionRule {
  const t = Prisma.raw(table);
  return statementRule({
    name: table,
    table,
    keepSeconds: marginSeconds,
    // Reads at most `limit` entries of the table's expires_at index and their rows; deletes those.
    removeDue: (cut, limit) => Prisma.sql`DELETE FROM ${t} WHERE expires_at < ${cut}::timestamptz AND id IN (
      SELECT id FROM ${t} WHERE expires_at < ${cut}::timestamptz ORDER BY expires_at LIMIT ${limit}::int)`,
    // One entry of the expires_at index.
    oldest: Prisma.sql`SELECT min(expires_at) AS oldest FROM ${t}`,
  });
}
