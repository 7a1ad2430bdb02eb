import test from "ava";
import { activeSecretWhere, activeSecretsNewestFirst, compareNewestFirst, isSecretActive } from "../../services/servers/domain/secret-policy.js";
import { NOW as CASES_NOW, SECRET_LIFETIME_CASES } from "../helpers/secret-lifetimes.js";

const NOW = new Date("2026-03-10T12:00:00Z");
const at = (iso: string) => new Date(iso);

test("active = not revoked and no expiry or an expiry still ahead (an expiry at now is past)", (t) => {
  const cases: Array<[string, { expiresAt: Date | null; revokedAt: Date | null }, boolean]> = [
    ["no expiry", { expiresAt: null, revokedAt: null }, true],
    ["expires later", { expiresAt: at("2026-03-10T12:00:01Z"), revokedAt: null }, true],
    ["expires now", { expiresAt: NOW, revokedAt: null }, false],
    ["expired", { expiresAt: at("2026-03-09T00:00:00Z"), revokedAt: null }, false],
    ["revoked in its overlap", { expiresAt: at("2026-03-11T00:00:00Z"), revokedAt: at("2026-03-10T00:00:00Z") }, false],
  ];
  for (const [name, secret, active] of cases) t.is(isSecretActive(secret, NOW), active, name);
});

test("newest first is by creation, not by expiry: a newer secret with an expiry ranks before an older one without", (t) => {
  const older = { kid: "k_old", createdAt: at("2026-03-01T00:00:00Z"), expiresAt: null, revokedAt: null };
  const newer = { kid: "k_new", createdAt: at("2026-03-05T00:00:00Z"), expiresAt: at("2026-03-20T00:00:00Z"), revokedAt: null };
  t.deepEqual(
    activeSecretsNewestFirst([older, newer], NOW).map((s) => s.kid),
    ["k_new", "k_old"],
  );
  t.deepEqual(
    activeSecretsNewestFirst([newer, older], NOW).map((s) => s.kid),
    ["k_new", "k_old"],
  );
});

test("secrets created at the same instant are ordered by kid, so the order is total", (t) => {
  const createdAt = at("2026-03-01T00:00:00Z");
  const b = { kid: "k_b", createdAt, expiresAt: null, revokedAt: null };
  const a = { kid: "k_a", createdAt, expiresAt: null, revokedAt: null };
  t.deepEqual(
    [b, a].sort(compareNewestFirst).map((s) => s.kid),
    ["k_a", "k_b"],
  );
  t.is(compareNewestFirst(a, a), 0);
});

test("two rotations in one clock tick: the secret without an expiry, then the later expiry, is newer", (t) => {
  const createdAt = at("2026-03-01T00:00:00Z");
  const first = { kid: "k_a", createdAt, expiresAt: at("2026-03-01T00:00:05Z"), revokedAt: null };
  const second = { kid: "k_b", createdAt, expiresAt: at("2026-03-01T00:01:00Z"), revokedAt: null };
  const current = { kid: "k_c", createdAt, expiresAt: null, revokedAt: null };
  const ranked = activeSecretsNewestFirst([first, current, second], at("2026-03-01T00:00:01Z"));
  t.deepEqual(
    ranked.map((s) => s.kid),
    ["k_c", "k_b", "k_a"],
  );
});

test("inactive secrets are left out; the first is the one that signs", (t) => {
  const rotatedOut = { kid: "k_1", createdAt: at("2026-03-01T00:00:00Z"), expiresAt: at("2026-03-11T00:00:00Z"), revokedAt: null };
  const expired = { kid: "k_0", createdAt: at("2026-02-01T00:00:00Z"), expiresAt: at("2026-03-02T00:00:00Z"), revokedAt: null };
  const revoked = { kid: "k_3", createdAt: at("2026-03-09T00:00:00Z"), expiresAt: null, revokedAt: at("2026-03-09T01:00:00Z") };
  const current = { kid: "k_2", createdAt: at("2026-03-08T00:00:00Z"), expiresAt: null, revokedAt: null };
  const ranked = activeSecretsNewestFirst([expired, rotatedOut, revoked, current], NOW);
  t.deepEqual(
    ranked.map((s) => s.kid),
    ["k_2", "k_1"],
  );
  t.deepEqual(activeSecretsNewestFirst([expired, revoked], NOW), []);
});

/** Evaluates a Prisma `where` of the forms activeSecretWhere uses (a field equal to null, `{ gt }`, `OR`) on one row. */
function matchesWhere(row: Record<string, Date | null>, where: Record<string, unknown>): boolean {
  return Object.entries(where).every(([key, condition]) => {
    if (key === "OR") return (condition as Record<string, unknown>[]).some((branch) => matchesWhere(row, branch));
    const value = row[key];
    if (value === undefined) throw new Error(`activeSecretWhere uses ${key}, which this evaluator does not know`);
    if (condition === null) return value === null;
    if (typeof condition === "object" && condition !== null && Object.keys(condition).join() === "gt") {
      const bound = (condition as { gt: Date }).gt;
      return value !== null && value.getTime() > bound.getTime();
    }
    throw new Error(`activeSecretWhere uses a condition this evaluator does not know: ${key} ${JSON.stringify(condition)}`);
  });
}

test("one definition of active: the Prisma where (activeSecretWhere) selects exactly the secrets isSecretActive calls active", (t) => {
  for (const c of SECRET_LIFETIME_CASES) {
    const row = { expiresAt: c.expiresAt, revokedAt: c.revokedAt };
    t.is(isSecretActive(row, CASES_NOW), c.active, `isSecretActive: ${c.name}`);
    t.is(matchesWhere(row, activeSecretWhere(CASES_NOW)), c.active, `activeSecretWhere: ${c.name}`);
  }
});
