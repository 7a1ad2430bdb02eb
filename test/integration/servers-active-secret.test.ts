/**
 * One definition of an active secret, held on real PostgreSQL: over one table of secret lifetimes,
 * the SQL predicate the raw readers use (activeSecretSql: the delivery claim, ResolveSigningKeys,
 * ResolvePullKeys), the Prisma `where` the store reads with (activeSecretWhere) and the pure rule
 * (isSecretActive) select the same secrets.
 */
import anyTest, { type TestFn } from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { activeSecretSql, hasActiveSecretSql } from "../../services/servers/active-secrets.js";
import { activeSecretWhere, isSecretActive } from "../../services/servers/domain/secret-policy.js";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { NOW, SECRET_LIFETIME_CASES } from "../helpers/secret-lifetimes.js";

const test = anyTest as TestFn<{ db: TestDatabase }>;
test.before(async (t) => {
  t.context = { db: await createTestDatabase({ maxConnections: 2 }) };
});
test.after.always(async (t) => {
  await t.context.db?.drop();
});

test("activeSecretSql, activeSecretWhere and isSecretActive select the same secrets", async (t) => {
  const { prisma } = t.context.db;
  const server = await prisma.server.create({ data: { name: "secrets" } });
  const kidOf = new Map<string, string>();
  for (const [i, c] of SECRET_LIFETIME_CASES.entries()) {
    const kid = `k_${i}`;
    kidOf.set(kid, c.name);
    await prisma.serverSecret.create({
      data: {
        serverId: server.id,
        purpose: "callback",
        kid,
        ciphertext: "sealed",
        createdAt: new Date("2026-03-01T00:00:00Z"),
        expiresAt: c.expiresAt,
        revokedAt: c.revokedAt,
      },
    });
  }
  const expected = SECRET_LIFETIME_CASES.filter((c) => c.active)
    .map((c) => c.name)
    .sort();
  const names = (rows: { kid: string }[]) => rows.map((r) => kidOf.get(r.kid) ?? r.kid).sort();
  const bySql = await prisma.$queryRaw<{ kid: string }[]>(
    Prisma.sql`SELECT k.kid FROM server_secrets k WHERE k.server_id = ${server.id}::uuid AND ${activeSecretSql("k", NOW)}`,
  );
  const byWhere = await prisma.serverSecret.findMany({ where: { serverId: server.id, ...activeSecretWhere(NOW) }, select: { kid: true } });
  const byRule = (await prisma.serverSecret.findMany({ where: { serverId: server.id } })).filter((s) => isSecretActive(s, NOW));
  t.deepEqual(names(bySql), expected, "SQL");
  t.deepEqual(names(byWhere), expected, "Prisma where");
  t.deepEqual(names(byRule), expected, "isSecretActive");
  // The EXISTS form the claim's sendable rule uses: true while one active secret is left, false once none is.
  const has = async () =>
    (await prisma.$queryRaw<{ has: boolean }[]>(Prisma.sql`SELECT ${hasActiveSecretSql(Prisma.sql`${server.id}::uuid`, "callback", NOW)} AS has`))[0]!.has;
  t.true(await has());
  await prisma.serverSecret.updateMany({ where: { serverId: server.id, revokedAt: null }, data: { revokedAt: NOW } });
  t.false(await has());
});
