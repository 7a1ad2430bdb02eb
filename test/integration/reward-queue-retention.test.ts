/**
 * The reward queue's retention (services/rewards/reward-queue-store.ts, ackedRewardEntryRetention), in the style of
 * retention.test.ts: an entry acknowledged longer ago than the limit goes; entries acknowledged since and every pending
 * entry, however old, stay; a second pass removes nothing; a pass stays within its budget; the oldest-age gauge reads the
 * oldest acknowledgement. The clock is injected: acknowledgements are written relative to `now`, never waited for.
 */
import test from "ava";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { ackRewardEntries, ackedRewardEntryRetention, queueRewardEntries } from "../../services/rewards/reward-queue-store.js";
import { runRetentionPass } from "../../services/retention/run-retention.js";
import { readRetentionSettings } from "../../services/retention/retention-settings.js";
import { retentionRules } from "../../services/retention/retention-rules.js";
import { runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { createEnvReader } from "../../services/shared/runtime/config.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { DEFAULT_FRAUD_RULES } from "../../services/hearts/domain/fraud-rules.js";

const DAY_MS = 86_400_000;
const NOW = new Date("2027-03-01T12:00:00.000Z");
const ago = (ms: number) => new Date(NOW.getTime() - ms);
const log = createLogger("reward-queue-retention-test", "silent");
const KEEP_DAYS = 90;

let db: TestDatabase;
test.before(async () => {
  db = await createTestDatabase();
});
test.after.always(async () => {
  await db?.drop();
});

/** Queues `n` entries on a new server; acknowledges those with an `ackedAt`. Returns their ids in that order. */
async function entriesOf(acks: Array<Date | null>): Promise<string[]> {
  const server = await db.prisma.server.create({ data: { name: `queue-${randomUUID().slice(0, 6)}` } });
  return runSqlTransaction(
    db.prisma,
    async (tx) => {
      const ids: string[] = [];
      for (const ackedAt of acks) {
        const [id] = await queueRewardEntries(tx, {
          serverId: server.id,
          heartId: null,
          player: { username: "Steve", steamId: null, discordId: null, minecraftUuid: null, accountId: null },
          rulesVersion: 1,
          entries: [{ key: randomUUID(), reason: "vote", commands: ["give Steve diamond 1"], onlineOnly: false }],
        });
        if (ackedAt !== null) await ackRewardEntries(tx, { serverId: server.id, ids: [id!], at: ackedAt });
        ids.push(id!);
      }
      return ids;
    },
    { timeoutMs: 10_000 },
  );
}

const pass = (rules = [ackedRewardEntryRetention(KEEP_DAYS * 86_400)], passMaxRows = 10_000) =>
  runRetentionPass({ db: db.prisma, rules, batchRows: 1, passMaxRows, log }, NOW);

const remaining = async (ids: string[]) =>
  (await db.prisma.rewardQueueEntry.findMany({ where: { id: { in: ids } }, select: { id: true } })).map((r) => r.id).sort();

test.serial(
  "entries acknowledged longer than RETENTION_REWARD_QUEUE_ACKED_DAYS ago go; entries acknowledged since and pending entries stay; a second pass removes nothing",
  async (t) => {
    const [old1, old2, young, pending] = await entriesOf([ago((KEEP_DAYS + 1) * DAY_MS), ago(400 * DAY_MS), ago((KEEP_DAYS - 1) * DAY_MS), null]);
    const first = await pass();
    t.is(first.removed.acked_reward_entries, 2);
    t.deepEqual(await remaining([old1!, old2!, young!, pending!]), [young!, pending!].sort());
    t.true(Math.abs((first.oldestAgeSeconds.acked_reward_entries ?? 0) - (KEEP_DAYS - 1) * 86_400) < 1);
    t.is((await pass()).removed.acked_reward_entries, 0);
  },
);

test.serial("a pass removes at most its budget; the next pass goes on", async (t) => {
  const ids = await entriesOf([ago(200 * DAY_MS), ago(201 * DAY_MS), ago(202 * DAY_MS)]);
  t.is((await pass(undefined, 2)).removed.acked_reward_entries, 2);
  t.is((await pass(undefined, 2)).removed.acked_reward_entries, 1);
  t.deepEqual(await remaining(ids), []);
});

test.serial("the rule is in the runner's list with RETENTION_REWARD_QUEUE_ACKED_DAYS (default 90 days)", (t) => {
  const settings = (env: Record<string, string>) => readRetentionSettings(createEnvReader(env), DEFAULT_FRAUD_RULES);
  t.is(settings({}).rewardQueueAckedSeconds, 90 * 86_400);
  t.is(settings({ RETENTION_REWARD_QUEUE_ACKED_DAYS: "30" }).rewardQueueAckedSeconds, 30 * 86_400);
  t.true(retentionRules(settings({})).some((rule) => rule.name === "acked_reward_entries" && rule.table === "reward_queue_entries"));
});
