/**
 * The reward queue API for game plugins (gateway/handle-reward-queue.ts, services/rewards/list-reward-queue.ts and
 * ack-reward-entries.ts) on the real stack: the gateway in front of the referral service's RewardQueueService on
 * PostgreSQL, keyed by the server's claim key exactly as the check/claim API. Entries are seeded with the queue's owner
 * module (queueRewardEntries), as the step that queues a counted vote's rewards writes them. Every answer validates
 * against the OpenAPI document.
 */
import anyTest, { type TestFn } from "ava";
import { Code, ConnectError } from "@connectrpc/connect";
import { randomBytes, randomUUID } from "node:crypto";
import { queueRewardEntries, type RewardPlayer } from "../../services/rewards/reward-queue-store.js";
import type { RewardEntry } from "../../services/rewards/domain/rewards-for-vote.js";
import { Prisma } from "../../gen/prisma/client.js";
import { runSql, runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { startStack, type TestGateway, type TestStack } from "../../scripts/harness/stack.js";
import { captureLog, type CapturedLog } from "../helpers/capture-log.js";
import { validateAgainstOpenApi, validateRequestBody } from "./openapi-validate.js";
import { eventually } from "../helpers/eventually.js";
import { PlayerIdKind } from "../../gen/proto/claims/v1/claims_pb.js";
import { PluginCallOutcome } from "../../gen/proto/claims/v1/plugin_activity_pb.js";
import { REWARD_QUEUE_ACK_PATH, REWARD_QUEUE_PATH } from "../../gateway/handle-reward-queue.js";

interface Context {
  stack: TestStack;
  gateway: TestGateway;
  gatewayLog: CapturedLog;
}

const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const stack = await startStack({ gateway: false, log: captureLog("warn").log });
  const gatewayLog = captureLog("debug");
  const gateway = await stack.startGateway({ log: gatewayLog.log, serviceToken: "gateway" });
  t.context = { stack, gateway, gatewayLog };
});

test.after.always(async (t) => {
  await t.context.stack?.close();
});

interface Listed {
  status: number;
  body: {
    entries: Array<{ id: string; reason: string; player: { name: string }; commands: string[]; online_only: boolean; created_at: string }>;
    next_check: number;
  };
}

/** GET the queue with `query` (the key included), validated against the document. */
async function list(t: { context: Context; deepEqual(a: unknown, b: unknown, m?: string): void }, query: string): Promise<Listed> {
  const res = await fetch(`${t.context.gateway.url}/api/rewards/queue?${query}`);
  const body = (await res.json()) as Listed["body"];
  t.deepEqual(validateAgainstOpenApi("/api/rewards/queue", "get", res.status, body).errors, [], `GET ?${query.replace(/key=[^&]*/, "key=...")}`);
  return { status: res.status, body };
}

/** POST an acknowledgement of `body` with the key, validated against the document. */
async function ack(t: { context: Context; deepEqual(a: unknown, b: unknown, m?: string): void }, key: string, body: unknown) {
  const res = await fetch(`${t.context.gateway.url}/api/rewards/queue/ack?key=${encodeURIComponent(key)}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const answer = await res.json();
  t.deepEqual(validateAgainstOpenApi("/api/rewards/queue/ack", "post", res.status, answer).errors, [], "POST ack");
  return { status: res.status, body: answer as { acked: string[]; unknown: string[]; error?: string } };
}

/**
 * `ids` oldest first, as the queue orders them: by the time they were queued, then by id (entries queued in the same
 * millisecond, as one vote's are, have no other order).
 */
async function oldestFirst(t: { context: Context }, ids: readonly string[]): Promise<string[]> {
  const rows = await runSql<{ id: string }>(
    t.context.stack.db.prisma,
    Prisma.sql`SELECT id FROM reward_queue_entries WHERE id = ANY(${[...ids]}::uuid[]) ORDER BY created_at, id`,
  );
  return rows.map((r) => r.id);
}

let seq = 0;
/** A server with a claim key, and a function that queues entries for a player with the queue's owner module. */
async function serverWithKey(t: { context: Context }) {
  const { clients, db } = t.context.stack;
  const { server } = await clients.admin.createServer({ name: `Queue ${++seq}` });
  const serverId = server!.id;
  const { claimKey } = await clients.admin.rotateClaimKey({ serverId });
  const queue = async (username: string, entries: Array<Partial<RewardEntry> & { onlineOnly: boolean }>) => {
    const player: RewardPlayer = { username, steamId: null, discordId: null, minecraftUuid: null, accountId: null };
    const full = entries.map((e, i) => ({
      key: e.key ?? `${randomUUID()}:vote:${i}`,
      reason: e.reason ?? "vote",
      commands: e.commands ?? [`give ${username} diamond ${i + 1}`],
      onlineOnly: e.onlineOnly,
    }));
    return runSqlTransaction(db.prisma, (tx) => queueRewardEntries(tx, { serverId, heartId: null, player, rulesVersion: 1, entries: full }), {
      timeoutMs: 10_000,
    });
  };
  return { serverId, claimKey, key: encodeURIComponent(claimKey), queue };
}

test("the whole queue lists every pending entry of the server, oldest first, with its player, commands and online_only; next_check is soon", async (t) => {
  const s = await serverWithKey(t);
  const other = await serverWithKey(t);
  const [first] = await s.queue("Steve", [{ onlineOnly: true, commands: ["give Steve diamond 1", "say thanks Steve"] }]);
  const [second, third] = await s.queue("Alex", [{ onlineOnly: false }, { onlineOnly: true, reason: "streak" }]);
  await other.queue("Steve", [{ onlineOnly: false }]);
  const { status, body } = await list(t, `key=${s.key}`);
  t.is(status, 200);
  t.deepEqual(
    body.entries.map((e) => e.id),
    await oldestFirst(t, [first!, second!, third!]),
  );
  const byId = new Map(body.entries.map((e) => [e.id, e]));
  t.like(byId.get(first!), { reason: "vote", player: { name: "Steve" }, commands: ["give Steve diamond 1", "say thanks Steve"], online_only: true });
  t.like(byId.get(third!), { reason: "streak", player: { name: "Alex" }, online_only: true });
  t.true(Number.isFinite(Date.parse(body.entries[0]!.created_at)));
  t.is(body.next_check, 10);
  t.is((await list(t, `key=${s.key}&limit=2`)).body.entries.length, 2);
});

test("naming the players online withholds the online-only entries of the players not named, and lists every entry that is not online-only", async (t) => {
  const s = await serverWithKey(t);
  const [steveOnline, steveAnytime] = await s.queue("Steve", [{ onlineOnly: true }, { onlineOnly: false }]);
  const [alexOnline, alexAnytime] = await s.queue("Alex", [{ onlineOnly: true }, { onlineOnly: false }]);
  const [notchOnline] = await s.queue("Notch", [{ onlineOnly: true }]);
  // Names are compared case-insensitively.
  const ids = async (query: string) => (await list(t, `key=${s.key}&${query}`)).body.entries.map((e) => e.id);
  const listed = async (query: string, expected: Array<string | undefined>) => t.deepEqual(await ids(query), await oldestFirst(t, expected as string[]), query);
  await listed("online=steve,NOTCH", [steveOnline, steveAnytime, alexAnytime, notchOnline]);
  await listed("online=Alex&online=Steve", [steveOnline, steveAnytime, alexOnline, alexAnytime]);
  // Nobody online: only what may run any time.
  await listed("online=", [steveAnytime, alexAnytime]);
});

test("acknowledged entries leave the list; a second acknowledgement of the same ids is idempotent; another server's or an unknown id is reported unknown, never failing the rest", async (t) => {
  const s = await serverWithKey(t);
  const other = await serverWithKey(t);
  const [a, b, c] = await s.queue("Steve", [{ onlineOnly: false }, { onlineOnly: false }, { onlineOnly: true }]);
  const [foreign] = await other.queue("Steve", [{ onlineOnly: false }]);
  const nowhere = randomUUID();
  t.deepEqual(validateRequestBody("/api/rewards/queue/ack", "post", { ids: [a, b] }).errors, []);

  const first = await ack(t, s.claimKey, { ids: [a, foreign, nowhere, b] });
  t.is(first.status, 200);
  t.deepEqual(first.body, { acked: [a, b], unknown: [foreign, nowhere] });
  t.deepEqual(
    (await list(t, `key=${s.key}`)).body.entries.map((e) => e.id),
    [c],
  );
  // Again (a plugin whose first answer was lost): the same answer, nothing changes.
  t.deepEqual((await ack(t, s.claimKey, { ids: [a, foreign, nowhere, b] })).body, { acked: [a, b], unknown: [foreign, nowhere] });
  t.deepEqual(
    (await list(t, `key=${s.key}`)).body.entries.map((e) => e.id),
    [c],
  );
  // The other server's entry was not touched.
  t.deepEqual(
    (await list(t, `key=${other.key}`)).body.entries.map((e) => e.id),
    [foreign],
  );
});

test("a plugin restarted between running and acknowledging lists the same ids again, so one that kept the ids it ran pays nothing twice", async (t) => {
  const s = await serverWithKey(t);
  const queued = await s.queue("Steve", [{ onlineOnly: false }, { onlineOnly: true }]);
  const ran = new Set((await list(t, `key=${s.key}`)).body.entries.map((e) => e.id));
  t.deepEqual([...ran], await oldestFirst(t, queued));
  // The plugin restarts before acknowledging: the next list names exactly the entries it ran, none new to run.
  const again = (await list(t, `key=${s.key}`)).body.entries.map((e) => e.id);
  t.deepEqual(again, [...ran]);
  t.deepEqual(
    again.filter((id) => !ran.has(id)),
    [],
  );
  t.deepEqual((await ack(t, s.claimKey, { ids: again })).body, { acked: again, unknown: [] });
  t.deepEqual((await list(t, `key=${s.key}`)).body.entries, []);
});

test("a wrong key answers what an empty queue answers, acknowledges nothing, and is charged to its source; the key never reaches a log line", async (t) => {
  const s = await serverWithKey(t);
  const [pending] = await s.queue("Steve", [{ onlineOnly: false }]);
  const wrong = `vck_${randomBytes(32).toString("base64url")}`;
  const listed = await list(t, `key=${encodeURIComponent(wrong)}`);
  t.is(listed.status, 200);
  t.deepEqual(listed.body.entries, []);
  const acked = await ack(t, wrong, { ids: [pending] });
  t.is(acked.status, 200);
  t.deepEqual(acked.body, { acked: [], unknown: [pending] });
  t.deepEqual(
    (await list(t, `key=${s.key}`)).body.entries.map((e) => e.id),
    [pending],
  );
  const logged = t.context.gatewayLog.raw.join("\n");
  t.false(logged.includes(wrong));
  t.false(logged.includes(s.claimKey));
  t.true(t.context.gatewayLog.lines.some((l) => l.route === "/api/rewards/queue" && l.outcome === "wrong_key"));

  // The guess limiter: past its budget a source's unknown keys are refused (429), while a key seen working still answers.
  const limited = await t.context.stack.startGateway({
    log: captureLog("warn").log,
    serviceToken: "gateway",
    overrides: () => ({ claimKeyGuesses: { perSource: 2 } }),
  });
  const get = (key: string) => fetch(`${limited.url}/api/rewards/queue?key=${encodeURIComponent(key)}`);
  t.is((await get(s.claimKey)).status, 200);
  t.is((await get(wrong)).status, 200);
  t.is((await get(wrong)).status, 200);
  const refused = await get(wrong);
  t.is(refused.status, 429);
  t.truthy(refused.headers.get("retry-after"));
  t.deepEqual(validateAgainstOpenApi("/api/rewards/queue", "get", 429, await refused.json()).errors, []);
  const right = await get(s.claimKey);
  t.is(right.status, 200);
  t.is(((await right.json()) as Listed["body"]).entries.length, 1);
});

test("bad input answers 400 JSON naming the problem, never a 500, and asks nothing", async (t) => {
  const s = await serverWithKey(t);
  const [id] = await s.queue("Steve", [{ onlineOnly: false }]);
  const cases: Array<[string, string]> = [
    ["", "key is required"],
    [`key=${s.key}&limit=0`, "limit: must be a whole number from 1 to 100"],
    [`key=${s.key}&limit=101`, "limit: must be a whole number from 1 to 100"],
    [`key=${s.key}&limit=ten`, "limit: must be a whole number from 1 to 100"],
    [`key=${s.key}&online=${Array.from({ length: 201 }, (_, i) => `p${i}`).join(",")}`, "online: at most 200 players per list"],
    [`key=${s.key}&online=${"x".repeat(65)}`, "online: a name is longer than 64 characters"],
  ];
  for (const [query, error] of cases) {
    const { status, body } = await list(t, query);
    t.is(status, 400, query);
    t.deepEqual(body, { error } as unknown, query);
  }
  const acks: Array<[unknown, string]> = [
    ["{not json", "body is not valid JSON"],
    [[id], 'body must be {"ids": [...]}'],
    [{ ids: id }, 'body must be {"ids": [...]}'],
    [{ ids: [] }, "ids: at least one id is required"],
    [{ ids: Array.from({ length: 101 }, () => randomUUID()) }, "ids: at most 100 per acknowledgement"],
    [{ ids: [id, "not-a-uuid"] }, "ids[1]: not an entry id (a uuid)"],
    [{ ids: [id, 7] }, "ids[1]: not an entry id (a uuid)"],
  ];
  for (const [body, error] of acks) {
    const answer = await ack(t, s.claimKey, body);
    t.is(answer.status, 400, JSON.stringify(body).slice(0, 60));
    t.deepEqual(answer.body, { error } as unknown);
  }
  const missingKey = await fetch(`${t.context.gateway.url}/api/rewards/queue/ack`, { method: "POST", body: JSON.stringify({ ids: [id] }) });
  t.is(missingKey.status, 400);
  // Nothing was acknowledged by any of them.
  t.deepEqual(
    (await list(t, `key=${s.key}`)).body.entries.map((e) => e.id),
    [id],
  );
});

test("the queue's calls are on the owner's plugin activity card as the check/claim calls are: per path and outcome, naming no player", async (t) => {
  const s = await serverWithKey(t);
  const [id] = await s.queue("Steve", [{ onlineOnly: false }]);
  await list(t, `key=${s.key}&online=Steve`);
  await ack(t, s.claimKey, { ids: [id] });
  await list(t, `key=${s.key}`);
  const rows = await eventually(async () => {
    const found = (await t.context.stack.clients.pluginActivity.getPluginActivity({ serverId: s.serverId })).rows;
    return found.length === 2 && found.find((r) => r.family === REWARD_QUEUE_PATH)?.calls === 2 ? found : undefined;
  });
  const byPath = (path: string) => rows.find((r) => r.family === path);
  t.like(byPath(REWARD_QUEUE_PATH), {
    playerIdKind: PlayerIdKind.UNSPECIFIED,
    outcome: PluginCallOutcome.OK,
    lastAction: "list",
    lastAnswer: "queue_empty",
    lastPlayerId: "",
  });
  t.like(byPath(REWARD_QUEUE_ACK_PATH), {
    playerIdKind: PlayerIdKind.UNSPECIFIED,
    outcome: PluginCallOutcome.OK,
    calls: 1,
    lastAction: "ack",
    lastAnswer: "acked",
  });
});

test("internally, a queue is named by its claim key or its server id, exactly one: an admin (or the server's owner) lists by id, and a call naming both is refused", async (t) => {
  const s = await serverWithKey(t);
  const other = await serverWithKey(t);
  const [id] = await s.queue("Steve", [{ onlineOnly: true }]);
  const { rewardQueue } = t.context.stack.clients;
  const byId = await rewardQueue.listRewardQueue({ serverId: s.serverId });
  t.deepEqual(
    byId.entries.map((e) => e.id),
    [id],
  );
  t.true(byId.keyValid);
  const both = await t.throwsAsync(rewardQueue.listRewardQueue({ serverId: other.serverId, claimKey: s.claimKey }));
  t.is(ConnectError.from(both).code, Code.InvalidArgument);
  const neither = await t.throwsAsync(rewardQueue.ackRewardEntries({ ids: [id!] }));
  t.is(ConnectError.from(neither).code, Code.InvalidArgument);
});

test("a page of large entries is cut to fit the internal message limit: the answer holds fewer entries, never a failure; the rest come on the next list", async (t) => {
  const s = await serverWithKey(t);
  // 20 commands of 500 bytes each: about 10 KiB an entry, 30 entries about 300 KiB.
  const command = `say ${"x".repeat(496)}`;
  const queued = await s.queue(
    "Steve",
    Array.from({ length: 30 }, () => ({ onlineOnly: false, commands: Array.from({ length: 20 }, () => command) })),
  );
  const first = await list(t, `key=${s.key}&limit=100`);
  t.is(first.status, 200);
  t.true(first.body.entries.length >= 1 && first.body.entries.length < 30, `${first.body.entries.length} entries`);
  t.is(first.body.entries[0]!.commands.length, 20);
  t.deepEqual((await ack(t, s.claimKey, { ids: first.body.entries.map((e) => e.id) })).body.unknown, []);
  const second = await list(t, `key=${s.key}&limit=100`);
  t.is(second.status, 200);
  const firstIds = new Set(first.body.entries.map((e) => e.id));
  t.true(second.body.entries.length > 0 && second.body.entries.every((e) => queued.includes(e.id) && !firstIds.has(e.id)));
});
