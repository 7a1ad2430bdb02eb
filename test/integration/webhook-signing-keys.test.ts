/**
 * The list's ed25519 signing keys (services/servers/webhook-signing-keys.ts) on a real PostgreSQL:
 * the first key created on first use exactly once under concurrency (the unique index on `current`
 * decides), rotations leave exactly one signing key, and the sealed private key is the published key's pair.
 */
import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import {
  SIGNING_KEY_OVERLAP_MS,
  createSigningKeyReader,
  listPublishedSigningKeys,
  loadCurrentSigningKey,
  rotateSigningKey,
} from "../../services/servers/webhook-signing-keys.js";
import { createSecretBox } from "../../services/shared/runtime/secrets.js";
import { publicKeyStringOf } from "../../services/shared/values/signature.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";

const test = anyTest as TestFn<{ db: TestDatabase }>;
const secretBox = createSecretBox(randomBytes(32));

test.before(async (t) => {
  t.context = { db: await createTestDatabase({ maxConnections: 10 }) };
});
test.after.always(async (t) => {
  await t.context.db?.drop();
});

test.serial("first use from many callers at once creates exactly one key, and every caller gets it", async (t) => {
  const deps = { prisma: t.context.db.prisma, secretBox, now: () => new Date() };
  const answers = await Promise.all([
    ...Array.from({ length: 6 }, () => loadCurrentSigningKey(deps).then((k) => k.kid)),
    ...Array.from({ length: 6 }, () => listPublishedSigningKeys(deps).then((keys) => keys[0]!.kid)),
  ]);
  t.is(await t.context.db.prisma.webhookSigningKey.count(), 1);
  t.is(new Set(answers).size, 1);
});

test.serial("the sealed private key (whsk_) is the pair of the published whpk_ key", async (t) => {
  const deps = { prisma: t.context.db.prisma, secretBox, now: () => new Date() };
  const current = await loadCurrentSigningKey(deps);
  const [published] = await listPublishedSigningKeys(deps);
  t.is(publicKeyStringOf(current.privateKey), published!.publicKey);
  const row = await t.context.db.prisma.webhookSigningKey.findUniqueOrThrow({ where: { kid: current.kid } });
  t.true(secretBox.open(row.privateKey).startsWith("whsk_"));
  t.false(row.privateKey.includes("whsk_"));
});

test.serial("concurrent rotations leave exactly one signing key; every retired key has its overlap end", async (t) => {
  const now = new Date();
  const deps = { prisma: t.context.db.prisma, secretBox, now: () => now };
  const results = await Promise.allSettled([rotateSigningKey(deps), rotateSigningKey(deps), rotateSigningKey(deps)]);
  t.true(results.some((r) => r.status === "fulfilled"));
  for (const r of results) if (r.status === "rejected") t.regex(String(r.reason), /another rotation/);
  const rows = await t.context.db.prisma.webhookSigningKey.findMany();
  t.is(rows.filter((r) => r.current === true).length, 1);
  for (const r of rows.filter((r) => r.current !== true)) {
    t.truthy(r.retiredAt);
    t.is(r.expiresAt!.getTime(), r.retiredAt!.getTime() + SIGNING_KEY_OVERLAP_MS);
  }
});

test.serial("the delivery service's reader caches the key, then reads the rotated one", async (t) => {
  let at = Date.now();
  const deps = { prisma: t.context.db.prisma, secretBox, now: () => new Date(at) };
  const read = createSigningKeyReader({ ...deps, cacheMs: 1_000 });
  const first = (await read()).kid;
  const rotated = await rotateSigningKey(deps);
  t.is((await read()).kid, first, "within the cache time the old key (still published) signs");
  at += 1_000;
  t.is((await read()).kid, rotated.key.kid);
});
