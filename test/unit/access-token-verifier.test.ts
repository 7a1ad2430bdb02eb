import test from "ava";
import type { PrismaClient } from "../../services/shared/adapters/db.js";
import { createTokenVerifier } from "../../services/access/service-tokens.js";

/** A stand-in for the one query the verifier makes, counting calls; answers after a tick like a database would. */
function fakePrisma(row: { revokedAt: Date | null }): { prisma: PrismaClient; calls: () => number } {
  let calls = 0;
  const prisma = {
    serviceToken: {
      findUnique: async () => {
        calls += 1;
        await new Promise((resolve) => setImmediate(resolve));
        return { id: "t1", name: "gateway", scopes: ["ingest"], revokedAt: row.revokedAt };
      },
    },
  } as unknown as PrismaClient;
  return { prisma, calls: () => calls };
}

test("concurrent checks of one token share one lookup, also when the cached answer expires under load", async (t) => {
  let now = 1_000;
  const row = { revokedAt: null as Date | null };
  const db = fakePrisma(row);
  const verify = createTokenVerifier(db.prisma, { ttlMs: 1_000, now: () => now });
  const first = await Promise.all(Array.from({ length: 50 }, () => verify("svc_token")));
  t.is(db.calls(), 1);
  t.true(first.every((c) => c?.name === "gateway"));
  now += 1_001;
  row.revokedAt = new Date();
  const second = await Promise.all(Array.from({ length: 50 }, () => verify("svc_token")));
  t.is(db.calls(), 2, "one refresh, not one per call in flight");
  t.true(
    second.every((c) => c === undefined),
    "a revoke takes effect after the cache time",
  );
});
