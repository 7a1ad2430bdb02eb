/**
 * ResolveSigningKeys (the gateway's hot path) and referral secret lifecycle:
 * kid, rotation overlap, revocation, expiry with an injected clock, and
 * encryption at rest.
 */
import anyTest, { type TestFn } from "ava";
import pg from "pg";
import { Code } from "@connectrpc/connect";
import { SigningKeyStatus } from "../../gen/proto/servers/v1/servers_pb.js";
import { DEFAULT_ROTATION_GRACE_SECONDS } from "../../services/servers/domain/secret-policy.js";
import { createReferralServer, errorDetails, rpcError, startHarness, type Harness } from "../../scripts/harness/referral-harness.js";

const test = anyTest as TestFn<{ h: Harness }>;

test.before(async (t) => {
  t.context.h = await startHarness();
});
test.after.always(async (t) => {
  await t.context.h?.close();
});

const resolve = async (h: Harness, serverId: string) => {
  const res = await h.admin.resolveSigningKeys({ serverId });
  return { status: res.status, keys: res.keys.map((k) => ({ kid: k.kid, secret: Buffer.from(k.secret).toString("utf8") })) };
};

test.serial("ResolveSigningKeys OK: active keys newest first, secret as UTF-8 bytes, in ONE SQL statement (no N+1)", async (t) => {
  const { h } = t.context;
  const { serverId, secret: first, kid: firstKid } = await createReferralServer(h);
  h.clock.advanceSeconds(60);
  const second = await h.admin.rotateReferralSecret({ serverId });
  h.clock.advanceSeconds(60);
  const third = await h.admin.rotateReferralSecret({ serverId });

  // Count the statements the driver sends while the RPC runs (this test is serial: nothing else queries).
  const originalQuery = pg.Client.prototype.query;
  const statements: string[] = [];
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const config = args[0] as string | { text?: string };
    statements.push(typeof config === "string" ? config : (config?.text ?? ""));
    return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof pg.Client.prototype.query;
  let resolved;
  try {
    resolved = await resolve(h, serverId);
  } finally {
    pg.Client.prototype.query = originalQuery;
  }
  // The caller's service token is looked up again once its cache entry (SERVICE_TOKEN_CACHE_MS, 1 s) is older: on a
  // loaded machine that falls inside the RPC (a CI-shaped run saw it). That is the authentication's, not the RPC's.
  const rpcStatements = statements.filter((s) => /\bselect\b/i.test(s) && !/"service_tokens"/.test(s));
  t.is(rpcStatements.length, 1, statements.join("\n---\n"));
  t.deepEqual(resolved, {
    status: SigningKeyStatus.OK,
    keys: [
      { kid: third.info?.kid ?? "", secret: third.secret },
      { kid: second.info?.kid ?? "", secret: second.secret },
      { kid: firstKid, secret: first },
    ],
  });
});

test("ResolveSigningKeys UNKNOWN_SERVER for a missing server and for a server_id that is not a uuid", async (t) => {
  const { h } = t.context;
  for (const serverId of ["00000000-0000-4000-8000-000000000000", "not-a-uuid", ""]) {
    t.deepEqual(await resolve(h, serverId), { status: SigningKeyStatus.UNKNOWN_SERVER, keys: [] }, serverId);
  }
});

test("ResolveSigningKeys REFERRALS_DISABLED when referrals are off, even with an active secret", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  await h.admin.setReferralsEnabled({ serverId, enabled: false });
  t.deepEqual(await resolve(h, serverId), { status: SigningKeyStatus.REFERRALS_DISABLED, keys: [] });
});

test("ResolveSigningKeys REFERRALS_DISABLED when referrals are on but no secret exists", async (t) => {
  const { h } = t.context;
  const { server } = await h.admin.createServer({ name: "no secret" });
  await h.admin.setReferralsEnabled({ serverId: server?.id ?? "", enabled: true });
  t.deepEqual(await resolve(h, server?.id ?? ""), { status: SigningKeyStatus.REFERRALS_DISABLED, keys: [] });
});

test("revoking a secret is immediate; revoking the last active one -> REFERRALS_DISABLED", async (t) => {
  const { h } = t.context;
  const { serverId, kid } = await createReferralServer(h);
  const revoked = await h.admin.revokeReferralSecret({ serverId, kid });
  t.like(revoked.info, { kid, active: false });
  t.truthy(revoked.info?.revokedAt);
  t.deepEqual(await resolve(h, serverId), { status: SigningKeyStatus.REFERRALS_DISABLED, keys: [] });
  t.like((await h.admin.revokeReferralSecret({ serverId, kid })).info, { kid, active: false }, "revoking again is idempotent");
});

test("revoking an unknown kid -> NotFound", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  t.like(errorDetails(await rpcError(h.admin.revokeReferralSecret({ serverId, kid: "k_nope" }))), { code: Code.NotFound, message: "unknown secret kid" });
});

test.serial("rotation overlap: the previous secret stays valid for the default 24 h grace, then only the new one verifies", async (t) => {
  const { h } = t.context;
  h.clock.set("2024-06-01T00:00:00Z");
  const { serverId, kid: oldKid } = await createReferralServer(h);
  h.clock.advanceSeconds(1);
  const rotated = await h.admin.rotateReferralSecret({ serverId });
  const newKid = rotated.info?.kid ?? "";
  t.true(rotated.secret.startsWith("rsec_"));
  t.deepEqual(
    (await resolve(h, serverId)).keys.map((k) => k.kid),
    [newKid, oldKid],
  );

  const listed = await h.admin.listReferralSecrets({ serverId });
  const old = listed.secrets.find((s) => s.kid === oldKid);
  t.is(Number(old?.expiresAt?.seconds), Date.parse("2024-06-01T00:00:01Z") / 1000 + DEFAULT_ROTATION_GRACE_SECONDS);
  t.is(listed.secrets.find((s) => s.kid === newKid)?.expiresAt, undefined, "the newest secret has no expiry");

  h.clock.advanceSeconds(DEFAULT_ROTATION_GRACE_SECONDS - 1);
  t.deepEqual(
    (await resolve(h, serverId)).keys.map((k) => k.kid),
    [newKid, oldKid],
    "still inside the overlap",
  );
  h.clock.advanceSeconds(1);
  t.deepEqual(
    (await resolve(h, serverId)).keys.map((k) => k.kid),
    [newKid],
    "expired exactly at now + grace",
  );
  t.false((await h.admin.listReferralSecrets({ serverId })).secrets.find((s) => s.kid === oldKid)?.active);
});

test.serial("rotation grace_seconds overrides the default; an older secret that already expires sooner keeps its expiry", async (t) => {
  const { h } = t.context;
  h.clock.set("2024-07-01T00:00:00Z");
  const { serverId, kid: a } = await createReferralServer(h);
  h.clock.advanceSeconds(10);
  const b = (await h.admin.rotateReferralSecret({ serverId, graceSeconds: 600n })).info?.kid ?? ""; // a expires at +610 s
  h.clock.advanceSeconds(10);
  const c = (await h.admin.rotateReferralSecret({ serverId, graceSeconds: 3600n })).info?.kid ?? ""; // b expires at +3620 s; a keeps +610 s
  const expiries = Object.fromEntries(
    (await h.admin.listReferralSecrets({ serverId })).secrets.map((s) => [s.kid, s.expiresAt ? Number(s.expiresAt.seconds) : null]),
  );
  const t0 = Date.parse("2024-07-01T00:00:00Z") / 1000;
  t.deepEqual(expiries, { [a]: t0 + 610, [b]: t0 + 3620, [c]: null });
  t.deepEqual(
    (await resolve(h, serverId)).keys.map((k) => k.kid),
    [c, b, a],
  );
  h.clock.set(new Date((t0 + 610) * 1000));
  t.deepEqual(
    (await resolve(h, serverId)).keys.map((k) => k.kid),
    [c, b],
  );
});

test("rotation refuses a negative or oversized grace_seconds", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  t.is((await rpcError(h.admin.rotateReferralSecret({ serverId, graceSeconds: -1n }))).code, Code.InvalidArgument);
  t.is((await rpcError(h.admin.rotateReferralSecret({ serverId, graceSeconds: 10n ** 9n }))).code, Code.InvalidArgument);
});

test("revocation is immediate even during a rotation overlap", async (t) => {
  const { h } = t.context;
  const { serverId, kid: oldKid } = await createReferralServer(h);
  const rotated = await h.admin.rotateReferralSecret({ serverId });
  await h.admin.revokeReferralSecret({ serverId, kid: oldKid });
  t.deepEqual(
    (await resolve(h, serverId)).keys.map((k) => k.kid),
    [rotated.info?.kid],
  );
});

test("secrets are stored encrypted: the raw ciphertext in the database does not contain the secret, and opens to it", async (t) => {
  const { h } = t.context;
  const { serverId, secret, kid } = await createReferralServer(h);
  const rows = await h.db.prisma.$queryRaw<
    Array<{ ciphertext: string }>
  >`SELECT ciphertext FROM server_secrets WHERE server_id = ${serverId}::uuid AND kid = ${kid}`;
  const ciphertext = rows[0]?.ciphertext ?? "";
  t.regex(ciphertext, /^v1:/);
  t.false(ciphertext.includes(secret));
  t.false(ciphertext.includes(secret.slice("rsec_".length)));
  t.false(ciphertext.includes(Buffer.from(secret).toString("base64")));
  t.is(h.deps.secretBox.open(ciphertext), secret);
});

test("CreateReferralSecret returns the value once; ListReferralSecrets shows kids and state but never values; Reveal returns it on request", async (t) => {
  const { h } = t.context;
  const { serverId, secret, kid } = await createReferralServer(h);
  t.regex(kid, /^k_[0-9a-f]{8}$/);
  t.regex(secret, /^rsec_[A-Za-z0-9_-]{43}$/);
  const listed = await h.admin.listReferralSecrets({ serverId });
  t.deepEqual(
    listed.secrets.map((s) => ({ kid: s.kid, active: s.active })),
    [{ kid, active: true }],
  );
  t.false(JSON.stringify(listed.secrets, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v)).includes(secret.slice(5)));
  t.is((await h.admin.revealReferralSecret({ serverId, kid })).secret, secret);
});

test("RevealReferralSecret refuses a revoked secret and an unknown kid", async (t) => {
  const { h } = t.context;
  const { serverId, kid } = await createReferralServer(h);
  await h.admin.revokeReferralSecret({ serverId, kid });
  t.like(errorDetails(await rpcError(h.admin.revealReferralSecret({ serverId, kid }))), { code: Code.FailedPrecondition, message: "secret is revoked" });
  t.is((await rpcError(h.admin.revealReferralSecret({ serverId, kid: "k_00000000" }))).code, Code.NotFound);
});

test("secret RPCs on an unknown server -> NotFound unknown server", async (t) => {
  const { h } = t.context;
  const serverId = "00000000-0000-4000-8000-000000000000";
  for (const call of [
    () => h.admin.createReferralSecret({ serverId }),
    () => h.admin.rotateReferralSecret({ serverId }),
    () => h.admin.listReferralSecrets({ serverId }),
    () => h.admin.revokeReferralSecret({ serverId, kid: "k_1" }),
    () => h.admin.revealReferralSecret({ serverId: "bad", kid: "k_1" }),
  ]) {
    t.like(errorDetails(await rpcError(call())), { code: Code.NotFound, message: "unknown server" });
  }
});

test("ListServerIds (the gateway's list of the server ids that exist): every server once, oldest first, page by page; the cursor after the last page lists the last minute's servers again, so a late commit is not missed", async (t) => {
  const { h } = t.context;
  const created: string[] = [];
  for (let i = 0; i < 3; i++) created.push((await h.admin.createServer({ name: `Listed ${i}` })).server?.id ?? "");
  const listed: string[] = [];
  let cursor = "";
  for (;;) {
    const page = await h.admin.listServerIds({ cursor, limit: 2 });
    t.true(page.serverIds.length <= 2);
    listed.push(...page.serverIds);
    cursor = page.nextCursor;
    if (!page.more) break;
  }
  // Each once (the harness's clock stands still, so their order is the ids' own: created_at, then id).
  t.deepEqual(
    listed.filter((id) => created.includes(id)),
    [...created].sort(),
  );
  const again = await h.admin.listServerIds({ cursor, limit: 1_000 });
  t.true(again.serverIds.includes(created[2] as string), "the newest server is within the overlap");
  t.false(again.more);
  const next = (await h.admin.createServer({ name: "Listed later" })).server?.id ?? "";
  t.true((await h.admin.listServerIds({ cursor: again.nextCursor, limit: 1_000 })).serverIds.includes(next), "a later server follows");
  t.deepEqual(errorDetails(await rpcError(h.admin.listServerIds({ limit: 5_001 }))).message, "limit must be between 1 and 5000");
  t.is(errorDetails(await rpcError(h.admin.listServerIds({ cursor: "not-a-cursor" }))).code, Code.InvalidArgument);
});
