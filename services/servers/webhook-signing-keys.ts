import { generateKeyPairSync, type KeyObject } from "node:crypto";
import type { PrismaClient } from "../shared/adapters/db.js";
import { isUniqueViolation } from "../shared/values/db-errors.js";
import { DomainError } from "../shared/rpc/errors.js";
import type { SecretBox } from "../shared/runtime/secrets.js";
import { generateKid } from "../shared/runtime/secrets.js";
import { SECRET_KEY_PREFIX, ed25519PrivateKeyOf, publicKeyStringOf } from "../shared/values/signature.js";

/**
 * The list's ed25519 key pairs for Standard Webhooks' `v1a` callback signature: list-wide (one
 * key signs every opted-in server's callbacks), so a public game plugin can verify a vote came from
 * the list with the published public key and no secret. The one home of `webhook_signing_keys`:
 * the delivery service reads the signing key here, the gateway reads the published keys through
 * the ListWebhookSigningKeys RPC.
 */

/** After a rotation the previous key stays published this long, so receivers that cached it keep verifying. */
export const SIGNING_KEY_OVERLAP_MS = 7 * 24 * 60 * 60 * 1000;
/** The algorithm name published beside each key. */
export const SIGNING_KEY_ALG = "Ed25519";

/** A published key: public material only. */
export interface PublishedSigningKey {
  kid: string;
  alg: typeof SIGNING_KEY_ALG;
  /** `whpk_<base64 of the raw 32-byte public key>`. */
  publicKey: string;
  createdAt: Date;
  /** Null while it signs; after a rotation, the end of its overlap. */
  expiresAt: Date | null;
  current: boolean;
}

/** The key that signs now. */
export interface CurrentSigningKey {
  kid: string;
  privateKey: KeyObject;
}

/** What the key store needs. */
export interface SigningKeyDeps {
  prisma: PrismaClient;
  secretBox: SecretBox;
  now: () => Date;
}

type KeyRow = { kid: string; publicKey: string; privateKey: string; current: boolean | null; createdAt: Date; expiresAt: Date | null };

/** A fresh key pair: the row's public key (raw, base64) and the sealed `whsk_<base64 seed>`. */
function newKeyRow(secretBox: SecretBox, now: Date): { kid: string; publicKey: string; privateKey: string; current: true; createdAt: Date } {
  const { privateKey } = generateKeyPairSync("ed25519");
  const jwk = privateKey.export({ format: "jwk" });
  const seed = Buffer.from(jwk.d ?? "", "base64url");
  const whsk = `${SECRET_KEY_PREFIX}${seed.toString("base64")}`;
  return {
    kid: `wk_${generateKid().slice("k_".length)}`,
    publicKey: publicKeyStringOf(ed25519PrivateKeyOf(whsk)),
    privateKey: secretBox.seal(whsk),
    current: true,
    createdAt: now,
  };
}

/**
 * The current key row, created on first use. Race-free: two processes creating the first key at
 * once both insert `current = true`; the unique index keeps one and the loser reads the winner's.
 */
async function ensureCurrentRow(deps: SigningKeyDeps): Promise<KeyRow> {
  // findFirst, not findUnique: Prisma batches concurrent findUnique calls into an `in` list, which a boolean key refuses.
  const existing = await deps.prisma.webhookSigningKey.findFirst({ where: { current: true } });
  if (existing) return existing;
  try {
    return await deps.prisma.webhookSigningKey.create({ data: newKeyRow(deps.secretBox, deps.now()) });
  } catch (error) {
    // Failure policy: another process created the first key meanwhile; its key is the one that signs.
    if (!isUniqueViolation(error)) throw error;
    return deps.prisma.webhookSigningKey.findFirstOrThrow({ where: { current: true } });
  }
}

/** The key that signs callbacks now (created on first use), opened. */
export async function loadCurrentSigningKey(deps: SigningKeyDeps): Promise<CurrentSigningKey> {
  const row = await ensureCurrentRow(deps);
  return { kid: row.kid, privateKey: ed25519PrivateKeyOf(deps.secretBox.open(row.privateKey)) };
}

/** The published keys: the current one (created on first use) first, then retired keys still in their overlap, newest first. */
export async function listPublishedSigningKeys(deps: SigningKeyDeps): Promise<PublishedSigningKey[]> {
  await ensureCurrentRow(deps);
  const now = deps.now();
  const rows = await deps.prisma.webhookSigningKey.findMany({
    where: { OR: [{ current: true }, { expiresAt: { gt: now } }] },
    orderBy: [{ createdAt: "desc" }, { kid: "asc" }],
  });
  return rows.sort((a, b) => Number(b.current === true) - Number(a.current === true)).map(toPublished);
}

/**
 * RotateWebhookSigningKey: a new key signs from now on; the previous one is retired and stays
 * published until now + SIGNING_KEY_OVERLAP_MS. Two rotations at once: the unique index on
 * `current` lets one win; the other is refused (conflict) and changes nothing.
 */
export async function rotateSigningKey(deps: SigningKeyDeps): Promise<{ key: PublishedSigningKey; keys: PublishedSigningKey[] }> {
  await ensureCurrentRow(deps);
  const now = deps.now();
  try {
    const created = await deps.prisma.$transaction(async (tx) => {
      await tx.webhookSigningKey.updateMany({
        where: { current: true },
        data: { current: null, retiredAt: now, expiresAt: new Date(now.getTime() + SIGNING_KEY_OVERLAP_MS) },
      });
      return tx.webhookSigningKey.create({ data: newKeyRow(deps.secretBox, now) });
    });
    return { key: toPublished(created), keys: await listPublishedSigningKeys(deps) };
  } catch (error) {
    // Failure policy: a concurrent rotation won the unique index; this one is rolled back and says so.
    if (isUniqueViolation(error))
      throw new DomainError("conflict", "another rotation of the signing key ran at the same time; list the keys and retry if needed");
    throw error;
  }
}

function toPublished(row: KeyRow): PublishedSigningKey {
  return { kid: row.kid, alg: SIGNING_KEY_ALG, publicKey: row.publicKey, createdAt: row.createdAt, expiresAt: row.expiresAt, current: row.current === true };
}

/** How long the delivery service keeps the opened signing key before reading it again. */
export const SIGNING_KEY_CACHE_MS = 5_000;

/**
 * The signing key read through a short cache (one read per SIGNING_KEY_CACHE_MS at most), for the
 * delivery service's hot path. After a rotation callbacks switch to the new key within the cache
 * time; the old key is published for days, so a callback signed meanwhile still verifies.
 */
export function createSigningKeyReader(deps: SigningKeyDeps & { cacheMs?: number }): () => Promise<CurrentSigningKey> {
  const cacheMs = deps.cacheMs ?? SIGNING_KEY_CACHE_MS;
  let cached: { key: Promise<CurrentSigningKey>; readAt: number } | undefined;
  return () => {
    const at = deps.now().getTime();
    if (!cached || at - cached.readAt >= cacheMs) {
      const key = loadCurrentSigningKey(deps);
      cached = { key, readAt: at };
      // Failure policy: a failed read is not cached; the attempt fails (retried per schedule) and the next one reads again.
      key.catch(() => {
        if (cached?.key === key) cached = undefined;
      });
    }
    return cached.key;
  };
}
