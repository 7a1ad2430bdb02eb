/**
 * The dashboard's Rewards card API (GET/PUT /servers/:serverId/reward-rules, POST .../reward-rules/preview,
 * GET .../reward-queue, POST .../reward-queue/requeue), as a signed-in owner through the real gateway and referral
 * service: the owner reads, saves (stale saves and invalid rules refused with the service's words), previews, lists
 * the pending queue and re-queues a range; another owner's server answers 404, and a request without a session 401.
 * The card in a browser: test/e2e/dashboard-rewards.test.ts.
 */
import anyTest, { type TestFn } from "ava";
import { ackRewardEntries, queueRewardEntries } from "../../services/rewards/reward-queue-store.js";
import { runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { ownerApi, signInOwner, type OwnerSession } from "../helpers/owner-session.js";

interface Context {
  stack: TestStack;
  gatewayUrl: string;
  session: OwnerSession;
  mine: string;
  theirs: string;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const stack = await startStack({ gateway: true });
  const gateway = await stack.startGateway({ dashboard: { token: undefined } });
  const { admin, access } = stack.clients;
  const mine = (await admin.createServer({ name: "mine" })).server!.id;
  const theirs = (await admin.createServer({ name: "theirs" })).server!.id;
  await access.createOwner({ ownerId: "rewards-dash-a", displayName: "A" });
  await access.createOwner({ ownerId: "rewards-dash-b", displayName: "B" });
  await access.assignServer({ serverId: mine, ownerId: "rewards-dash-a" });
  await access.assignServer({ serverId: theirs, ownerId: "rewards-dash-b" });
  const session = await signInOwner(access, gateway.url, "rewards-dash-a");
  t.context = { stack, gatewayUrl: gateway.url, session, mine, theirs };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

const api = (t: { context: Context }, method: string, path: string, body?: unknown) => ownerApi(t.context.gatewayUrl, t.context.session, method, path, body);
const RULES = { perVote: [{ commands: ["give {player} diamond {weight}"], onlineOnly: false }] };

test.serial(
  "an owner saves their server's rules from version 0, reads them back, previews a draft, and a stale or invalid save is refused with the service's words",
  async (t) => {
    const { mine } = t.context;
    const empty = await api(t, "GET", `/servers/${mine}/reward-rules`);
    t.is(empty.status, 200, empty.text);
    t.like(JSON.parse(empty.text), { version: 0, rules: {} });

    const invalid = await api(t, "PUT", `/servers/${mine}/reward-rules`, { base_version: 0, rules: { perVote: [{ commands: ["give {playr} 1"] }] } });
    t.is(invalid.status, 400);
    t.regex(JSON.parse(invalid.text).error, /^perVote\[0\]\.commands\[0\]: unknown placeholder \{playr\}/);
    const saved = await api(t, "PUT", `/servers/${mine}/reward-rules`, { base_version: 0, rules: RULES });
    t.is(saved.status, 200, saved.text);
    t.deepEqual(JSON.parse(saved.text), { version: 1 });
    const stale = await api(t, "PUT", `/servers/${mine}/reward-rules`, { base_version: 0, rules: RULES });
    t.is(stale.status, 409, stale.text);
    t.regex(JSON.parse(stale.text).error, /changed since version 0 was read \(now version 1\)/);

    const read = JSON.parse((await api(t, "GET", `/servers/${mine}/reward-rules`)).text) as { version: number; saved_by: string; rules: typeof RULES };
    t.like(read, { version: 1, saved_by: "owner:rewards-dash-a", rules: RULES });
    const preview = await api(t, "POST", `/servers/${mine}/reward-rules/preview`, {
      player: "Alex",
      month_total: 10,
      rules: { milestones: [{ scope: "month", every: 10, reward: { commands: ["crate give {player} vote"] } }] },
    });
    t.is(preview.status, 200, preview.text);
    t.deepEqual(
      (JSON.parse(preview.text) as { entries: { reason: string; commands: string[] }[] }).entries.map((e) => [e.reason, e.commands]),
      [["milestone", ["crate give Alex vote"]]],
      "the draft's milestone, not the saved per-vote reward",
    );
  },
);

test.serial("an owner lists their server's pending entries and re-queues what was acknowledged in a range", async (t) => {
  const { stack, mine } = t.context;
  const player = { username: "Steve", steamId: null, discordId: null, minecraftUuid: null, accountId: null };
  await runSqlTransaction(
    stack.prisma,
    async (tx) => {
      const [acked] = await queueRewardEntries(tx, {
        serverId: mine,
        heartId: null,
        player,
        rulesVersion: 1,
        entries: [{ key: "dash:vote:0", reason: "vote", commands: ["give Steve diamond 1"], onlineOnly: false }],
      });
      await ackRewardEntries(tx, { serverId: mine, ids: [acked!], at: new Date("2026-11-20T10:00:00Z") });
    },
    { timeoutMs: 10_000 },
  );
  t.deepEqual(JSON.parse((await api(t, "GET", `/servers/${mine}/reward-queue`)).text), { entries: [] }, "nothing pending yet");
  const bad = await api(t, "POST", `/servers/${mine}/reward-queue/requeue`, { from: "2026-11-21T00:00:00Z", to: "2026-11-20T00:00:00Z" });
  t.is(bad.status, 400);
  t.is(JSON.parse(bad.text).error, "acked_to: must be after acked_from");
  const requeued = await api(t, "POST", `/servers/${mine}/reward-queue/requeue`, { from: "2026-11-20T00:00:00Z", to: "2026-11-21T00:00:00Z" });
  t.is(requeued.status, 200, requeued.text);
  t.deepEqual(JSON.parse(requeued.text), { requeued: 1, scanned: 1, next_after: null });
  const pending = JSON.parse((await api(t, "GET", `/servers/${mine}/reward-queue`)).text) as {
    entries: { reason: string; username: string; commands: string[] }[];
  };
  t.deepEqual(
    pending.entries.map((e) => [e.reason, e.username, e.commands]),
    [["vote", "Steve", ["give Steve diamond 1"]]],
  );
});

test.serial("the Rewards card's routes refuse another owner's server (404, as a missing one) and a request without a session (401)", async (t) => {
  const { stack, theirs, mine } = t.context;
  const routes: [string, string, unknown][] = [
    ["GET", "reward-rules", undefined],
    ["PUT", "reward-rules", { base_version: 0, rules: RULES }],
    ["POST", "reward-rules/preview", {}],
    ["GET", "reward-queue", undefined],
    ["POST", "reward-queue/requeue", { from: "2026-11-01T00:00:00Z", to: "2026-12-01T00:00:00Z" }],
  ];
  for (const [method, path, body] of routes) {
    const other = await api(t, method, `/servers/${theirs}/${path}`, body);
    t.is(other.status, 404, `${method} ${path} on another owner's server`);
    const anonymous = await fetch(`${t.context.gatewayUrl}/dashboard/api/servers/${mine}/${path}`, {
      method,
      headers: { "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    t.is(anonymous.status, 401, `${method} ${path} without a session`);
  }
  t.is((await stack.clients.rewards.getRewardRules({ serverId: theirs })).version, 0, "nothing of B's server was saved");
});
