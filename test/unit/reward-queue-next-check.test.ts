import test from "ava";
import { BUSY_CHECK_SECONDS, DEFAULT_IDLE_CHECK_SECONDS, QUIET_CHECK_SECONDS, nextCheckSeconds } from "../../services/rewards/domain/next-check.js";

const NOW = new Date("2026-06-01T12:00:00.000Z");
const minutesAgo = (m: number) => new Date(NOW.getTime() - m * 60_000);

const cases: Array<[string, { pending: boolean; lastVoteAt: Date | null; idleSeconds?: number }, number]> = [
  ["entries pending: soon, whenever the last vote was", { pending: true, lastVoteAt: null }, BUSY_CHECK_SECONDS],
  ["nothing pending, a vote 2 minutes ago: soon (its rewards may be queued any moment)", { pending: false, lastVoteAt: minutesAgo(2) }, BUSY_CHECK_SECONDS],
  ["nothing pending, a vote exactly 5 minutes ago: soon", { pending: false, lastVoteAt: minutesAgo(5) }, BUSY_CHECK_SECONDS],
  ["nothing pending, the last vote 20 minutes ago: backing off", { pending: false, lastVoteAt: minutesAgo(20) }, QUIET_CHECK_SECONDS],
  ["nothing pending, the last vote 2 hours ago: the idle interval", { pending: false, lastVoteAt: minutesAgo(120) }, DEFAULT_IDLE_CHECK_SECONDS],
  ["nothing pending, never a vote: the idle interval", { pending: false, lastVoteAt: null }, DEFAULT_IDLE_CHECK_SECONDS],
  ["the idle setting is used when quiet", { pending: false, lastVoteAt: null, idleSeconds: 600 }, 600],
  ["an idle setting below the backing-off step caps it", { pending: false, lastVoteAt: minutesAgo(20), idleSeconds: 30 }, 30],
];

for (const [title, q, expected] of cases) {
  test(`next_check: ${title} -> ${expected} s`, (t) => {
    t.is(nextCheckSeconds({ ...q, now: NOW, idleSeconds: q.idleSeconds ?? DEFAULT_IDLE_CHECK_SECONDS }), expected);
  });
}
