/**
 * One table of secret lifetimes at NOW, with whether each secret is active, for the tests that
 * hold every reader's definition of "active" equal: isSecretActive, the Prisma `where`
 * (activeSecretWhere) and the SQL predicate (activeSecretSql).
 */
export const NOW = new Date("2026-03-10T12:00:00Z");

export const SECRET_LIFETIME_CASES: ReadonlyArray<{ name: string; expiresAt: Date | null; revokedAt: Date | null; active: boolean }> = [
  { name: "no expiry", expiresAt: null, revokedAt: null, active: true },
  { name: "expires a millisecond later", expiresAt: new Date(NOW.getTime() + 1), revokedAt: null, active: true },
  { name: "expires a day later", expiresAt: new Date("2026-03-11T12:00:00Z"), revokedAt: null, active: true },
  { name: "expires now", expiresAt: NOW, revokedAt: null, active: false },
  { name: "expired a millisecond ago", expiresAt: new Date(NOW.getTime() - 1), revokedAt: null, active: false },
  { name: "revoked, no expiry", expiresAt: null, revokedAt: new Date("2026-03-09T00:00:00Z"), active: false },
  { name: "revoked in its overlap", expiresAt: new Date("2026-03-11T00:00:00Z"), revokedAt: new Date("2026-03-10T00:00:00Z"), active: false },
  { name: "revoked at a later time", expiresAt: null, revokedAt: new Date("2026-03-12T00:00:00Z"), active: false },
  { name: "revoked and expired", expiresAt: new Date("2026-03-01T00:00:00Z"), revokedAt: new Date("2026-02-01T00:00:00Z"), active: false },
];
