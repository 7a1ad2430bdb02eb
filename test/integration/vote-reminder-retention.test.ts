/**
 * Retention of ended vote reminders (services/reminders/reminder-store.ts, endedReminderRetention): an unsubscribed or
 * bounced subscription, with its address, goes RETENTION_REMINDER_DAYS after it ended; one ended since, and active and
 * pending ones however old, stay; a second pass removes nothing. The clock is injected.
 */
import test from "ava";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "../../scripts/harness/db.js";
import { endReminder, endedReminderRetention, upsertPendingReminder, activateReminder } from "../../services/reminders/reminder-store.js";
import { mintConfirmToken, newUnsubscribeNonce } from "../../services/reminders/reminder-tokens.js";
import { runRetentionPass } from "../../services/retention/run-retention.js";
import { readRetentionSettings } from "../../services/retention/retention-settings.js";
import { retentionRules } from "../../services/retention/retention-rules.js";
import { createEnvReader } from "../../services/shared/runtime/config.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { DEFAULT_FRAUD_RULES } from "../../services/hearts/domain/fraud-rules.js";

const DAY_MS = 86_400_000;
const NOW = new Date("2027-03-01T12:00:00.000Z");
const ago = (ms: number) => new Date(NOW.getTime() - ms);
const KEEP_DAYS = 30;
const log = createLogger("vote-reminder-retention-test", "silent");

let db: TestDatabase;
test.before(async () => {
  db = await createTestDatabase();
});
test.after.always(async () => {
  await db?.drop();
});

/** A subscription on a new server: pending, active, or ended at `endedAt`. */
async function reminderOf(state: "pending" | "active" | { ended: "unsubscribed" | "bounced"; at: Date }, createdAt = ago(400 * DAY_MS)): Promise<string> {
  const server = await db.prisma.server.create({ data: { name: `reminders-${randomUUID().slice(0, 6)}` } });
  const id = randomUUID();
  const { hash } = mintConfirmToken(id);
  await upsertPendingReminder(db.prisma, {
    id,
    serverId: server.id,
    voterIdentity: "steve",
    email: "steve@example.com",
    confirmHash: hash,
    nonce: newUnsubscribeNonce(),
    now: createdAt,
    notChangedSince: createdAt,
  });
  if (state === "pending") return id;
  await activateReminder(db.prisma, { id, confirmHash: hash, now: createdAt });
  if (state !== "active") await endReminder(db.prisma, { id, state: state.ended, now: state.at });
  return id;
}

const pass = () => runRetentionPass({ db: db.prisma, rules: [endedReminderRetention(KEEP_DAYS * 86_400)], batchRows: 1, passMaxRows: 10_000, log }, NOW);
const remaining = async (ids: string[]) =>
  (await db.prisma.voteReminder.findMany({ where: { id: { in: ids } }, select: { id: true } })).map((r) => r.id).sort();

test.serial(
  "reminders ended longer than RETENTION_REMINDER_DAYS ago go with their address; ended since, active and pending ones stay; a second pass removes nothing",
  async (t) => {
    const oldUnsubscribed = await reminderOf({ ended: "unsubscribed", at: ago((KEEP_DAYS + 1) * DAY_MS) });
    const oldBounced = await reminderOf({ ended: "bounced", at: ago(200 * DAY_MS) });
    const young = await reminderOf({ ended: "unsubscribed", at: ago((KEEP_DAYS - 1) * DAY_MS) });
    const active = await reminderOf("active");
    const pending = await reminderOf("pending");
    const first = await pass();
    t.is(first.removed.ended_vote_reminders, 2);
    t.deepEqual(await remaining([oldUnsubscribed, oldBounced, young, active, pending]), [young, active, pending].sort());
    t.is((await pass()).removed.ended_vote_reminders, 0);
  },
);

test.serial("the rule is in the runner's list with RETENTION_REMINDER_DAYS (default 30 days)", (t) => {
  const settings = (env: Record<string, string>) => readRetentionSettings(createEnvReader(env), DEFAULT_FRAUD_RULES);
  t.is(settings({}).endedReminderSeconds, 30 * 86_400);
  t.is(settings({ RETENTION_REMINDER_DAYS: "7" }).endedReminderSeconds, 7 * 86_400);
  t.true(retentionRules(settings({})).some((rule) => rule.name === "ended_vote_reminders" && rule.table === "vote_reminders"));
});
