/**
 * Voter roles (issue 32) against the Discord emulator: a vote counted through the real pipeline (CastHeart, the
 * outbox, the relay, Kafka, the delivery consumer) with a discord_id on a server with voter roles makes its voter's
 * role due; the role job (its clock injected) adds it through the one Discord client and removes it once the duration
 * from the latest vote has passed. A bot without the permission (Discord's 50013) is recorded and shown through
 * GetVoterRoleSettings and the dashboard's server page; the bot token is never answered back; another owner is refused.
 */
import { randomBytes } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { VoterRoleService } from "../../gen/proto/servers/v1/voter_roles_pb.js";
import { DASHBOARD_SESSION_HEADER } from "../../services/access/auth-interceptor.js";
import { createServiceTransport, withHeaders } from "../../services/shared/rpc/service-transport.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { createDiscordRest, type DiscordRest } from "../../services/shared/adapters/discord-rest.js";
import { runVoterRolePass, type VoterRolePassDeps } from "../../services/voter-roles/give-voter-roles.js";
import { claimDueGrants, recordVoterRoleVotes, rescheduleGrant } from "../../services/voter-roles/voter-role-store.js";
import { startDiscordEmulator, type DiscordEmulator } from "../../scripts/harness/discord-emulator.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { eventually } from "../helpers/eventually.js";
import { ownerApi, signInOwner } from "../helpers/owner-session.js";
import { exportVoterData } from "../../services/voter-data/export-voter-data.js";
import { eraseVoterData, newTombstone } from "../../services/voter-data/erase-voter-data.js";

interface Context {
  stack: TestStack;
  discord: DiscordEmulator;
  client: DiscordRest;
  gatewayUrl: string;
}
const test = anyTest as TestFn<Context>;

/** The stack's and the role job's clock. */
let clockMs = Date.parse("2027-06-01T12:00:00Z");
let voterN = 0;
const HOUR_S = 3_600;
const BOT = "bot-token-aaaaaaaaaaaaaaaaaaaaaaaa.secret";
const MEMBER = "700000000000000001";
const ROLE = "600000000000000001";

test.before(async (t) => {
  const stack = await startStack({
    now: () => new Date(clockMs),
    allowInsecureCallbacks: true,
    pipeline: {
      name: "voter-roles",
      delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100, allowInsecureCallbacks: true },
    },
  });
  const discord = await startDiscordEmulator({ now: () => clockMs });
  const client = createDiscordRest({ baseUrl: discord.baseUrl, now: () => clockMs, sleep: async (ms) => void (clockMs += Math.max(0, ms)) });
  const gateway = await stack.startGateway({ dashboard: { token: undefined } });
  t.context = { stack, discord, client, gatewayUrl: gateway.url };
});
test.after.always(async (t) => {
  await t.context.client?.close();
  await t.context.discord?.close();
  await t.context.stack?.close();
});

const passDeps = (c: Context): VoterRolePassDeps => ({ db: c.stack.prisma, discord: c.client, secretBox: c.stack.secretBox, batchRows: 50, log: c.stack.log });

/** A server with voter roles on a fresh guild (the member in it, the bot `manager` allowed to manage roles unless null). */
async function newServer(c: Context, manager: string | null, ownerId?: string) {
  const { server } = await c.stack.clients.admin.createServer({ name: `roles-${randomBytes(3).toString("hex")}` });
  const serverId = server!.id;
  if (ownerId !== undefined) {
    await c.stack.clients.access.createOwner({ ownerId, displayName: `Owner ${ownerId}` }).catch(() => undefined);
    await c.stack.clients.access.assignServer({ serverId, ownerId });
  }
  const guildId = `80000000000${String(Math.floor(Math.random() * 1e6)).padStart(6, "0")}`;
  c.discord.createGuild(guildId, { members: [MEMBER], roles: [ROLE], managers: manager === null ? [] : [manager] });
  const saved = await c.stack.clients.voterRoles.setVoterRoleSettings({ serverId, botToken: BOT, guildId, roleId: ROLE, durationSeconds: 48 * HOUR_S });
  return { serverId, guildId, saved: saved.settings! };
}

/** Casts a counted vote with the member's Discord id at `at`; waits until the consumer recorded its grant. */
async function vote(stack: TestStack, serverId: string, at: number): Promise<void> {
  clockMs = at;
  voterN += 1;
  const voterIdentity = `roles-voter-${voterN}`;
  const res = await stack.clients.hearts.castHeart({
    serverId,
    voterIdentity,
    username: "Steve",
    discordId: MEMBER,
    ip: `198.51.100.${(voterN % 200) + 20}`,
    userAgent: "Mozilla/5.0 (X11; Linux x86_64) VoterRolesTest/1.0",
  });
  if (!res.counted) throw new Error("the vote did not count");
  await eventually(
    async () => {
      const grant = await stack.prisma.voterRoleGrant.findFirst({ where: { serverId, discordId: MEMBER } });
      return grant !== null && grant.expiresAt.getTime() === at + 48 * HOUR_S * 1000 ? true : undefined;
    },
    { timeoutMs: 30_000, message: "the vote's role grant recorded" },
  );
}

test.serial("a voter role is given on a counted vote and removed after its duration from the latest vote (clock injected)", async (t) => {
  const c = t.context;
  const { serverId, guildId, saved } = await newServer(c, BOT);
  t.like(saved, { configured: true, botTokenSet: true, guildId, roleId: ROLE, durationSeconds: 48 * HOUR_S, lastError: "" });
  t.false(JSON.stringify(saved).includes(BOT), "the token is never answered back");
  const first = Date.parse("2027-06-01T12:00:00Z");
  await vote(c.stack, serverId, first);
  t.deepEqual(c.discord.memberRoles(guildId, MEMBER), []);
  t.like(await runVoterRolePass(passDeps(c), new Date(clockMs)), { added: 1 });
  t.deepEqual(c.discord.memberRoles(guildId, MEMBER), [ROLE], "given on the counted vote");
  // A second vote a day later: the role lasts 48 hours from it, not from the first.
  const second = first + 25 * HOUR_S * 1000;
  await vote(c.stack, serverId, second);
  await runVoterRolePass(passDeps(c), new Date(clockMs));
  clockMs = first + 48 * HOUR_S * 1000 + 60_000;
  t.like(await runVoterRolePass(passDeps(c), new Date(clockMs)), { removed: 0 });
  t.deepEqual(c.discord.memberRoles(guildId, MEMBER), [ROLE], "still held 48 hours after the first vote: the second extended it");
  clockMs = second + 48 * HOUR_S * 1000;
  t.like(await runVoterRolePass(passDeps(c), new Date(clockMs)), { removed: 1 });
  t.deepEqual(c.discord.memberRoles(guildId, MEMBER), [], "removed when it lapsed");
  t.is(await c.stack.prisma.voterRoleGrant.count({ where: { serverId } }), 0, "the lapsed grant is deleted");
  t.deepEqual(c.discord.secondTooManyRequests(), []);
  const after = (await c.stack.clients.voterRoles.getVoterRoleSettings({ serverId })).settings!;
  t.is(after.lastError, "");
  t.truthy(after.lastOkAt);
});

test.serial("a bot without the permission (50013 Missing Permissions) is recorded and shown on the dashboard's server page, without the token", async (t) => {
  const c = t.context;
  const ownerId = `roles-owner-${randomBytes(3).toString("hex")}`;
  const { serverId, guildId } = await newServer(c, null, ownerId);
  const at = Date.parse("2027-07-01T12:00:00Z");
  await vote(c.stack, serverId, at);
  // Signed in on the stack's clock as it now is (a session opened before the vote's jump would have expired).
  const session = await signInOwner(c.stack.clients.access, c.gatewayUrl, ownerId);
  t.like(await runVoterRolePass(passDeps(c), new Date(clockMs)), { failed: 1 });
  t.deepEqual(c.discord.memberRoles(guildId, MEMBER), []);
  const settings = (await c.stack.clients.voterRoles.getVoterRoleSettings({ serverId })).settings!;
  t.regex(settings.lastError, /Missing Permissions \(50013\)/);
  t.truthy(settings.lastErrorAt);
  const page = await ownerApi(c.gatewayUrl, session, "GET", `/servers/${serverId}/voter-roles`);
  t.is(page.status, 200);
  const body = JSON.parse(page.text) as { voter_roles: Record<string, unknown> };
  t.like(body.voter_roles, { configured: true, bot_token_set: true, guild_id: guildId, last_error_at: new Date(at).toISOString() });
  t.regex(String(body.voter_roles.status), /^Last error at .*: Discord answered 403 to Add Guild Member Role: Missing Permissions \(50013\)$/);
  t.false(page.text.includes(MEMBER), "the voter's Discord id is not in the owner's status line");
  t.false(page.text.includes(BOT), "the token never reaches the dashboard");
  // The server's page carries the card whose status line shows it (voter-roles.js renders `status`).
  const html = await (await fetch(`${c.gatewayUrl}/dashboard/`)).text();
  t.true(html.includes('id="voter-roles-status"') && html.includes("/dashboard/voter-roles.js"));
  const script = await (await fetch(`${c.gatewayUrl}/dashboard/voter-roles.js`)).text();
  t.regex(script, /status\.textContent = v\.status/);
  // Retried later, not at once.
  t.like(await runVoterRolePass(passDeps(c), new Date(clockMs)), { claimed: 0 });
});

test.serial("a vote recorded while a failing step runs keeps its grant due at once with fresh attempts; without it the step's backoff holds", async (t) => {
  const c = t.context;
  const { serverId } = await newServer(c, null);
  const at = Date.parse("2027-07-01T12:00:00Z");
  await vote(c.stack, serverId, at);
  const grantOf = () => c.stack.prisma.voterRoleGrant.findFirstOrThrow({ where: { serverId, discordId: MEMBER } });
  // The role job claims the grant (due at its lease end) and its step fails ...
  const leaseUntil = new Date(at + 120_000);
  const [claimed] = await claimDueGrants(c.stack.prisma, { now: new Date(at), leaseUntil, limit: 1 });
  t.truthy(claimed);
  const backoff = new Date(at + 32 * 60_000);
  const step = { serverId, discordId: MEMBER, dueAt: backoff, given: false, attempts: 6, now: new Date(at + 1_000), claimedDueAt: leaseUntil };
  // ... while the member votes again (the owner fixed the bot's role meanwhile).
  await recordVoterRoleVotes(
    c.stack.prisma,
    [{ serverId, discordId: MEMBER, voterIdentity: "roles-again", countedAt: new Date(at + 500) }],
    new Date(at + 500),
  );
  await rescheduleGrant(c.stack.prisma, step);
  t.like(await grantOf(), { dueAt: new Date(at + 500), attempts: 0 }, "the vote's due time and fresh attempts stay");
  // Without a vote meanwhile, the step's backoff and attempts are written.
  await claimDueGrants(c.stack.prisma, { now: new Date(at + 600), leaseUntil, limit: 1 });
  await rescheduleGrant(c.stack.prisma, step);
  t.like(await grantOf(), { dueAt: backoff, attempts: 6 });
});

test.serial("only the server's owner and list admins may configure voter roles: another owner's session is refused as for a missing server", async (t) => {
  const c = t.context;
  const owner = `roles-owner-${randomBytes(3).toString("hex")}`;
  const other = `roles-other-${randomBytes(3).toString("hex")}`;
  const [mine, theirs] = [await signInOwner(c.stack.clients.access, c.gatewayUrl, owner), await signInOwner(c.stack.clients.access, c.gatewayUrl, other)];
  const { serverId } = await newServer(c, BOT, owner);
  const settings = { bot_token: "", guild_id: "800000000000999999", role_id: ROLE, duration_seconds: 3_600 };
  const refused = await ownerApi(c.gatewayUrl, theirs, "PUT", `/servers/${serverId}/voter-roles`, settings);
  t.is(refused.status, 404);
  t.deepEqual(JSON.parse(refused.text), { error: "unknown server" });
  t.is((await ownerApi(c.gatewayUrl, theirs, "GET", `/servers/${serverId}/voter-roles`)).status, 404);
  // The RPCs themselves, called with the other owner's session (as the gateway would), refuse it the same way.
  const gatewayToken = (await c.stack.clients.access.createServiceToken({ name: "roles-gateway", scopes: ["dashboard"] })).token;
  const asOther = createClient(
    VoterRoleService,
    withHeaders(createServiceTransport(c.stack.rpcUrl, gatewayToken), { [DASHBOARD_SESSION_HEADER]: theirs.sessionToken }),
  );
  const codeOf = (p: Promise<unknown>) =>
    p.then(
      () => "ok",
      (e: unknown) => `${Code[ConnectError.from(e).code]}: ${ConnectError.from(e).rawMessage}`,
    );
  const valid = { serverId, botToken: "", guildId: "800000000000999999", roleId: ROLE, durationSeconds: 3_600 };
  t.is(await codeOf(asOther.getVoterRoleSettings({ serverId })), "NotFound: unknown server");
  t.is(await codeOf(asOther.setVoterRoleSettings(valid)), "NotFound: unknown server");
  t.is(await codeOf(asOther.clearVoterRoleSettings({ serverId })), "NotFound: unknown server");
  const saved = await ownerApi(c.gatewayUrl, mine, "PUT", `/servers/${serverId}/voter-roles`, settings);
  t.is(saved.status, 200, saved.text);
  t.like(JSON.parse(saved.text).voter_roles, { guild_id: "800000000000999999", duration_seconds: 3_600, bot_token_set: true });
  t.false(saved.text.includes(BOT));
  const bad = await c.stack.clients.voterRoles
    .setVoterRoleSettings({ serverId, botToken: "", guildId: "not-an-id", roleId: ROLE, durationSeconds: 3_600 })
    .catch((e: unknown) => ConnectError.from(e).rawMessage);
  t.is(bad, "guild_id must be a Discord id: 17 to 20 decimal digits");
});

test.serial("a voter's erasure makes their role lapse at once: the role job removes it and deletes the grant with the Discord id", async (t) => {
  const c = t.context;
  const { serverId, guildId } = await newServer(c, BOT);
  await vote(c.stack, serverId, Date.parse("2027-08-01T12:00:00Z"));
  await runVoterRolePass(passDeps(c), new Date(clockMs));
  t.deepEqual(c.discord.memberRoles(guildId, MEMBER), [ROLE]);
  const exported = await exportVoterData(c.stack.prisma, { serverId, key: { kind: "discord_id", value: MEMBER }, now: new Date(clockMs) });
  t.deepEqual(
    exported.servers[0]?.voterRoles.map((r) => [r.discord_id, r.given]),
    [[MEMBER, true]],
    "the export lists the voter's role grant",
  );
  const tombstone = newTombstone();
  const erased = await eraseVoterData(c.stack.prisma, { serverId, key: { kind: "discord_id", value: MEMBER }, now: new Date(clockMs), tombstone });
  t.is(erased.counts.voter_role_grants, 1);
  t.like(await runVoterRolePass(passDeps(c), new Date(clockMs)), { removed: 1 });
  t.deepEqual(c.discord.memberRoles(guildId, MEMBER), []);
  t.is(await c.stack.prisma.voterRoleGrant.count({ where: { serverId } }), 0, "no Discord id kept");
});
