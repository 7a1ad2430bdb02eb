/**
 * The retention pass's pace (RETENTION_DUTY_PERCENT): after each statement that removed rows it waits so its
 * statements take at most that share of the time, and a stopping process ends the pass at the next statement.
 */
import test from "ava";
import type { PrismaClient } from "../../services/shared/adapters/db.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import type { RetentionRule } from "../../services/shared/adapters/retention-rule.js";
import { idleAfterMs, runRetentionPass } from "../../services/retention/run-retention.js";

/** A rule with `due` rows whose every statement takes `statementMs` on the fake clock. */
function fakeRule(due: number, clock: { ms: number }, statementMs: number): RetentionRule {
  let left = due;
  return {
    name: "fake",
    table: "fake",
    removeBatch: async (_db, _now, limit) => {
      clock.ms += statementMs;
      const n = Math.min(limit, left);
      left -= n;
      return n;
    },
    oldestAge: async () => null,
  };
}

const log = createLogger("test", "silent");
const db = {} as PrismaClient;

test("at 10 %, a statement of 30 ms is followed by 270 ms idle; none after the statement that found nothing", async (t) => {
  const clock = { ms: 0 };
  const waits: number[] = [];
  const sleep = async (ms: number) => {
    waits.push(ms);
    clock.ms += ms;
  };
  const result = await runRetentionPass(
    { db, rules: [fakeRule(25, clock, 30)], batchRows: 10, passMaxRows: 100, log, pace: { dutyPercent: 10, sleep, clockMs: () => clock.ms } },
    new Date(),
  );
  t.is(result.removed.fake, 25);
  t.deepEqual(waits, [270, 270, 270], "three statements removed rows (10, 10, 5); the fourth found none");
  t.is(clock.ms, 4 * 30 + 3 * 270, "the statements took a tenth of the time that removed rows");
});

test("at 100 % no wait; idleAfterMs is d x (100 / percent - 1)", async (t) => {
  t.is(idleAfterMs(30, 100), 0);
  t.is(idleAfterMs(30, 50), 30);
  t.is(idleAfterMs(30, 10), 270);
  const clock = { ms: 0 };
  const waits: number[] = [];
  await runRetentionPass(
    {
      db,
      rules: [fakeRule(25, clock, 30)],
      batchRows: 10,
      passMaxRows: 100,
      log,
      pace: { dutyPercent: 100, sleep: async (ms) => void waits.push(ms), clockMs: () => clock.ms },
    },
    new Date(),
  );
  t.deepEqual(waits, []);
});

test("a stopping process ends the pass at the next statement", async (t) => {
  const clock = { ms: 0 };
  let stopping = false;
  const sleep = async (ms: number) => {
    clock.ms += ms;
    stopping = true;
  };
  const result = await runRetentionPass(
    {
      db,
      rules: [fakeRule(100, clock, 30)],
      batchRows: 10,
      passMaxRows: 100,
      log,
      pace: { dutyPercent: 10, sleep, clockMs: () => clock.ms, stopping: () => stopping },
    },
    new Date(),
  );
  t.is(result.removed.fake, 10, "one statement, then the stop was seen");
});
