/** Owners RPCs (AccessService): create, assign servers, list an owner's servers; login link input checks. */
import test from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";

let stack: TestStack;
test.before(async () => {
  stack = await startStack({ gateway: false, publicBaseUrl: "https://list.example.com" });
});
test.after.always(async () => {
  await stack?.close();
});

async function codeOf(promise: Promise<unknown>): Promise<{ code: Code; message: string } | "ok"> {
  try {
    await promise;
    return "ok";
  } catch (error) {
    const e = ConnectError.from(error);
    return { code: e.code, message: e.rawMessage };
  }
}

test("CreateOwner takes the list's account id; a second one with the same id is AlreadyExists; bad ids are InvalidArgument", async (t) => {
  const { access } = stack.clients;
  const { owner } = await access.createOwner({ ownerId: " acct:42@eu ", displayName: " Alice " });
  t.like(owner, { id: "acct:42@eu", displayName: "Alice" });
  t.deepEqual(await codeOf(access.createOwner({ ownerId: "acct:42@eu" })), { code: Code.AlreadyExists, message: "owner already exists" });
  for (const ownerId of ["", "with space", "-leading-dash", "x".repeat(129), "semi;colon"]) {
    t.deepEqual(
      await codeOf(access.createOwner({ ownerId })),
      { code: Code.InvalidArgument, message: "owner_id must be 1-128 letters, digits, '.', '_', ':', '@' or '-'" },
      ownerId,
    );
  }
});

test("AssignServer gives a server to an owner, moves it, and an empty owner_id makes it operators-only; ListOwnerServers follows", async (t) => {
  const { access, admin } = stack.clients;
  await access.createOwner({ ownerId: "acct-1" });
  await access.createOwner({ ownerId: "acct-2" });
  const { server } = await admin.createServer({ name: "assignable" });
  const serverId = server!.id;
  t.is((await access.assignServer({ serverId, ownerId: "acct-1" })).server?.ownerId, "acct-1");
  t.deepEqual(
    (await access.listOwnerServers({ ownerId: "acct-1" })).servers.map((s) => s.id),
    [serverId],
  );
  await access.assignServer({ serverId, ownerId: "acct-2" });
  t.deepEqual((await access.listOwnerServers({ ownerId: "acct-1" })).servers, []);
  t.deepEqual(
    (await access.listOwnerServers({ ownerId: "acct-2" })).servers.map((s) => s.id),
    [serverId],
  );
  t.is((await access.assignServer({ serverId, ownerId: "" })).server?.ownerId, "");
  t.deepEqual((await access.listOwnerServers({ ownerId: "acct-2" })).servers, []);
  t.deepEqual(await codeOf(access.assignServer({ serverId, ownerId: "nobody" })), { code: Code.NotFound, message: "unknown owner" });
  t.deepEqual(await codeOf(access.assignServer({ serverId: "00000000-0000-0000-0000-000000000000", ownerId: "acct-1" })), {
    code: Code.NotFound,
    message: "unknown server",
  });
  t.deepEqual(await codeOf(access.assignServer({ serverId: "not-a-uuid", ownerId: "acct-1" })), { code: Code.NotFound, message: "unknown server" });
  t.deepEqual(await codeOf(access.listOwnerServers({ ownerId: "nobody" })), { code: Code.NotFound, message: "unknown owner" });
});

test("CreateDashboardLoginLink: a one-time URL on the public base URL, 5 minutes by default, at most an hour; unknown owners are NotFound", async (t) => {
  const { access } = stack.clients;
  await access.createOwner({ ownerId: "acct-links" });
  const before = Date.now();
  const link = await access.createDashboardLoginLink({ ownerId: "acct-links" });
  t.regex(link.url, /^https:\/\/list\.example\.com\/dashboard\/login\?token=dl_[A-Za-z0-9_-]{43}$/);
  const ttlMs = Number(link.expiresAt!.seconds) * 1000 - before;
  t.true(ttlMs > 290_000 && ttlMs <= 301_000, `${ttlMs}`);
  const hour = await access.createDashboardLoginLink({ ownerId: "acct-links", ttlSeconds: 3600n });
  t.true(Number(hour.expiresAt!.seconds) * 1000 - before > 3_590_000);
  t.deepEqual(await codeOf(access.createDashboardLoginLink({ ownerId: "acct-links", ttlSeconds: 3601n })), {
    code: Code.InvalidArgument,
    message: "ttl_seconds must be 0 (default 300) to 3600",
  });
  t.deepEqual(await codeOf(access.createDashboardLoginLink({ ownerId: "nobody" })), { code: Code.NotFound, message: "unknown owner" });
  // Only the hash is stored: the token in the URL appears nowhere in the table.
  const token = new URL(link.url).searchParams.get("token")!;
  const rows = await stack.prisma.dashboardLoginLink.findMany({ where: { ownerId: "acct-links" } });
  t.is(rows.length, 2);
  t.false(JSON.stringify(rows).includes(token));
});

test("RedeemDashboardLoginLink: of concurrent redemptions of one link exactly one opens a session (the conditional update decides)", async (t) => {
  const { access } = stack.clients;
  await access.createOwner({ ownerId: "acct-race" });
  const { url } = await access.createDashboardLoginLink({ ownerId: "acct-race" });
  const loginToken = new URL(url).searchParams.get("token")!;
  const outcomes = await Promise.all(Array.from({ length: 8 }, () => codeOf(access.redeemDashboardLoginLink({ loginToken }))));
  t.is(outcomes.filter((o) => o === "ok").length, 1, JSON.stringify(outcomes));
  for (const o of outcomes.filter((x) => x !== "ok"))
    t.deepEqual(o, { code: Code.NotFound, message: "this login link is invalid or expired or already used (ask for a new one)" });
  t.is((await access.listDashboardSessions({ ownerId: "acct-race" })).sessions.length, 1);
});
