import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import type { SecretBox } from "../shared/runtime/secrets.js";
import { activeSecretWhere, activeSecretsNewestFirst } from "./domain/secret-policy.js";

/**
 * Where secrets are read: "active" (domain/secret-policy.ts) as the SQL readers take it, and
 * the reads of active secrets other services make (the delivery claim and the callback
 * transport, the test referral event). No other module reads `server_secrets` with SQL.
 */

/** A secret family, as the `SecretPurpose` enum of the database. */
type Purpose = "referral" | "callback" | "pull";

/**
 * isSecretActive / activeSecretWhere as an SQL predicate over the secret row `alias`: not
 * revoked, and no expiry or an expiry after `now`. test/integration/servers-active-secret.test.ts
 * holds the three equal on a table of cases.
 */
export function activeSecretSql(alias: string, now: Date): Prisma.Sql {
  const k = Prisma.raw(alias);
  return Prisma.sql`(${k}.revoked_at IS NULL AND (${k}.expires_at IS NULL OR ${k}.expires_at > ${now}::timestamptz))`;
}

/** Whose secrets a reader reads: a server's (by server_id) or, for callback secrets, an endpoint's (by endpoint_id). */
type Holder = "server" | "endpoint";

function holderColumn(holder: Holder): Prisma.Sql {
  return holder === "endpoint" ? Prisma.raw("k.endpoint_id") : Prisma.raw("k.server_id");
}

/**
 * Whether the server `id` (an SQL expression; with `holder` "endpoint", the callback endpoint `id`)
 * holds an active secret of `purpose`: an EXISTS predicate.
 */
export function hasActiveSecretSql(id: Prisma.Sql, purpose: Purpose, now: Date, holder: Holder = "server"): Prisma.Sql {
  return Prisma.sql`EXISTS (SELECT 1 FROM server_secrets k WHERE ${holderColumn(holder)} = ${id} AND k.purpose = ${purpose}::"SecretPurpose" AND ${activeSecretSql("k", now)})`;
}

/** One secret as sealedActiveSecretsJsonSql reads it (dates as ISO text from JSON). */
export interface SealedSecretJson {
  kid: string;
  ciphertext: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
}

/**
 * The server `id`'s (an SQL expression; with `holder` "endpoint", the callback endpoint's) active
 * secrets of `purpose`, still sealed, as one JSON array value (SealedSecretJson[]; `[]` when none),
 * so a statement can read them with the rows it claims. Rank them with toSealedNewestFirst.
 */
export function sealedActiveSecretsJsonSql(id: Prisma.Sql, purpose: Purpose, now: Date, holder: Holder = "server"): Prisma.Sql {
  return Prisma.sql`(
    SELECT coalesce(json_agg(json_build_object('kid', k.kid, 'ciphertext', k.ciphertext, 'created_at', k.created_at,
                                               'expires_at', k.expires_at, 'revoked_at', k.revoked_at)), '[]'::json)
    FROM server_secrets k
    WHERE ${holderColumn(holder)} = ${id} AND k.purpose = ${purpose}::"SecretPurpose" AND ${activeSecretSql("k", now)})`;
}

/** The sealed secrets read by sealedActiveSecretsJsonSql that are active at `now`, newest first (secret-policy's rule). */
export function toSealedNewestFirst(rows: readonly SealedSecretJson[], now: Date): string[] {
  const secrets = rows.map((k) => ({
    kid: k.kid,
    ciphertext: k.ciphertext,
    createdAt: new Date(k.created_at),
    expiresAt: k.expires_at === null ? null : new Date(k.expires_at),
    revokedAt: k.revoked_at === null ? null : new Date(k.revoked_at),
  }));
  return activeSecretsNewestFirst(secrets, now).map((k) => k.ciphertext);
}

/** The callback endpoint's active secrets, opened, newest first: not revoked and not past the end of their rotation overlap. */
export async function loadCallbackSecrets(prisma: PrismaClient, secretBox: SecretBox, endpointId: string, now: Date): Promise<string[]> {
  const rows = await prisma.serverSecret.findMany({ where: { endpointId, purpose: "callback", ...activeSecretWhere(now) } });
  return activeSecretsNewestFirst(rows, now).map((r) => secretBox.open(r.ciphertext));
}

/** The newest active referral secret with its kid, opened, or null. */
export async function loadNewestReferralSecret(
  prisma: PrismaClient,
  secretBox: SecretBox,
  serverId: string,
  now: Date,
): Promise<{ kid: string; secret: string } | null> {
  const [row] = activeSecretsNewestFirst(await prisma.serverSecret.findMany({ where: { serverId, purpose: "referral", ...activeSecretWhere(now) } }), now);
  return row ? { kid: row.kid, secret: secretBox.open(row.ciphertext) } : null;
}
