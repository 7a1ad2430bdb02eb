import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PeriodClosedSchema, PeriodStandingSchema } from "../../gen/proto/events/v1/events_pb.js";
import { HEARTS_TOPIC } from "../shared/adapters/bus.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { writeOutbox } from "../shared/adapters/outbox.js";
import { runSqlTransaction, type SqlTx } from "../shared/adapters/sql/executor.js";
import type { EnvReader } from "../shared/runtime/config.js";
import { PERIOD_CLOSED_EVENT, PERIOD_CLOSED_TOP } from "../shared/values/event-types.js";
import type { Logger } from "../shared/runtime/log.js";
import { createPassLoop, type PassLoop } from "../shared/runtime/pass-loop.js";
import { awardsForPeriod, periodOfKind, standingsToRead, type RewardPeriod } from "./domain/period-awards.js";
import { parseRewardRules, REWARD_RULE_LIMITS, type RewardRules } from "./domain/reward-rules.js";
import { claimDuePeriods, closeRewardPeriod, readPeriodStandings, type DuePeriod, type PeriodStandingRow } from "./period-store.js";
import { idsOf } from "./queue-vote-rewards.js";
import { queueRewardEntries } from "./reward-queue-store.js";
import { readRewardRulesOf } from "./reward-rules-store.js";

/** The period closer's settings (REWARD_PERIOD_*; README's settings table). */
export interface PeriodCloserSettings {
  /** REWARD_PERIOD_CLOSE_ENABLED (default true): false closes nothing. */
  enabled: boolean;
  /** REWARD_PERIOD_CLOSE_INTERVAL_SECONDS (default 60): seconds between two passes. */
  intervalSeconds: number;
  /**
   * REWARD_PERIOD_SETTLE_SECONDS (default 300): a period closes this long after it ended, so the votes of its last
   * moments, which reach the reward step through Kafka, are counted first.
   */
  settleSeconds: number;
  /** REWARD_PERIOD_CLOSE_BATCH (default 20): periods one transaction closes at most. */
  batchPeriods: number;
  /** Periods one pass closes at most (REWARD_PERIOD_CLOSE_PASS_MAX, default 2,000): the rest wait for the next pass. */
  passMaxPeriods: number;
}

/** Reads the period closer's settings (REWARD_PERIOD_*), each bounded; problems are reported with the process's others. */
export function readPeriodCloserSettings(r: EnvReader): PeriodCloserSettings {
  return {
    enabled: r.bool("REWARD_PERIOD_CLOSE_ENABLED", true),
    intervalSeconds: r.int("REWARD_PERIOD_CLOSE_INTERVAL_SECONDS", 60, { min: 1, max: 3_600 }),
    settleSeconds: r.int("REWARD_PERIOD_SETTLE_SECONDS", 300, { min: 0, max: 86_400 }),
    batchPeriods: r.int("REWARD_PERIOD_CLOSE_BATCH", 20, { min: 1, max: 500 }),
    passMaxPeriods: r.int("REWARD_PERIOD_CLOSE_PASS_MAX", 2_000, { min: 1, max: 100_000 }),
  };
}

/** What one pass did, in counts (logged; nothing of a voter). */
export interface ClosedPeriods {
  /** Periods closed now (each with its period.closed event). */
  closed: number;
  /** Award entries queued. */
  awarded: number;
  /** Awards not queued: the voter's name or ids cannot be put in the command. */
  skipped: number;
}

/** A batch's transaction bounds: a batch of periods (each up to MAX_PLACES standings and entries) commits in well under a second. */
const CLOSE_TRANSACTION = { timeoutMs: 30_000, maxWaitMs: 10_000 };

/**
 * ONE pass of the period closer at `now` (issue 31): every open period (a week or month a server with reward rules
 * counted votes in) that ended at least `settleSeconds` before `now` is closed, in batches of `batchPeriods`, each ONE
 * transaction: the batch's periods are claimed (locked; another closer's are skipped), and per period the closed mark
 * is set only if it is still open, the standings are read (top N: the event's top and the highest place awarded), the
 * awards of the server's current rules are queued with keys `<server>:<period>:award:<place>:<position>`, and the
 * `period.closed` event is written to the outbox. A crash rolls all of it back; a second closer, a rerun or a clock
 * that jumped back finds the period closed and writes nothing. A clock that jumped forward over several periods
 * finds each of them due, and closes each once.
 */
export async function closeDuePeriods(
  deps: { prisma: PrismaClient; log: Logger },
  settings: Pick<PeriodCloserSettings, "settleSeconds" | "batchPeriods" | "passMaxPeriods">,
  now: Date,
): Promise<ClosedPeriods> {
  const done: ClosedPeriods = { closed: 0, awarded: 0, skipped: 0 };
  const due = new Date(now.getTime() - settings.settleSeconds * 1000);
  for (let handled = 0; handled < settings.passMaxPeriods; ) {
    const claimed = await runSqlTransaction(
      deps.prisma,
      async (tx) => {
        const periods = await claimDuePeriods(tx, { due, limit: Math.min(settings.batchPeriods, settings.passMaxPeriods - handled) });
        const rulesOf = await currentRulesOf(deps, [...new Set(periods.map((p) => p.serverId))]);
        for (const p of periods) await closeOne(tx, p, rulesOf.get(p.serverId), now, done);
        return periods.length;
      },
      CLOSE_TRANSACTION,
    );
    handled += claimed;
    if (claimed < settings.batchPeriods) break;
  }
  if (done.closed > 0) deps.log.info(done, "reward periods closed");
  return done;
}

/** The servers' current rules, parsed; a server whose saved rules no longer parse gets none (logged). */
async function currentRulesOf(deps: { prisma: PrismaClient; log: Logger }, serverIds: string[]): Promise<Map<string, { rules: RewardRules; version: number }>> {
  const out = new Map<string, { rules: RewardRules; version: number }>();
  for (const [serverId, saved] of await readRewardRulesOf(deps.prisma, serverIds)) {
    const parsed = parseRewardRules(saved.rules, REWARD_RULE_LIMITS);
    if (parsed.ok) out.set(serverId, { rules: parsed.rules, version: saved.version });
    // Failure policy: close the period without awards - rules saved valid that no longer parse cannot give anything, and keeping it open would retry it every pass at the head of the batch.
    else deps.log.error({ serverId, version: saved.version, problems: parsed.errors.length }, "saved reward rules do not parse; period awards not queued");
  }
  return out;
}

/** Closes one claimed period in the batch's transaction (nothing when it is closed already). */
async function closeOne(tx: SqlTx, p: DuePeriod, saved: { rules: RewardRules; version: number } | undefined, now: Date, done: ClosedPeriods): Promise<void> {
  const period = periodOfKind(p.kind, p.period);
  // A row of a kind or key this code does not know was not written by it; it is closed so it never blocks the batch.
  if (!(await closeRewardPeriod(tx, p, now)) || period === null) return;
  const top = saved === undefined ? PERIOD_CLOSED_TOP : standingsToRead(saved.rules, p.kind, PERIOD_CLOSED_TOP);
  const standings = await readPeriodStandings(tx, { serverId: p.serverId, period, top });
  if (saved !== undefined) {
    const byPosition = new Map(standings.map((s) => [s.position, s]));
    const placed = awardsForPeriod(
      saved.rules,
      p.serverId,
      period,
      standings.map((s) => ({ ...s, ids: idsOf(s.player) })),
    );
    for (const award of placed) {
      done.skipped += award.skipped.length;
      const row = byPosition.get(award.standing.position) as PeriodStandingRow;
      const queued = await queueRewardEntries(tx, {
        serverId: p.serverId,
        heartId: row.heartId,
        player: row.player,
        rulesVersion: saved.version,
        entries: award.entries,
      });
      done.awarded += queued.length;
    }
  }
  await writeOutbox(tx, periodClosedEvent(p.serverId, period, standings.slice(0, PERIOD_CLOSED_TOP), now));
  done.closed++;
}

/** The `period.closed` event of a server's period, with its final standings. */
function periodClosedEvent(serverId: string, period: RewardPeriod, standings: readonly PeriodStandingRow[], at: Date) {
  return {
    topic: HEARTS_TOPIC,
    type: PERIOD_CLOSED_EVENT,
    serverId,
    occurredAt: at,
    payload: {
      case: "periodClosed" as const,
      value: create(PeriodClosedSchema, {
        serverId,
        kind: period.kind,
        period: period.period,
        startsAt: timestampFromDate(period.start),
        endsAt: timestampFromDate(period.end),
        standings: standings.map((s) =>
          create(PeriodStandingSchema, { place: s.place, username: s.player.username, voterIdentity: s.voterIdentity, votes: s.votes }),
        ),
      }),
    },
  };
}

/** The period closer of the one process that runs it: start() and stop() (waits for a pass in progress). */
export type PeriodCloserLoop = PassLoop;

/**
 * The loop that runs a closer pass every `settings.intervalSeconds` (createPassLoop: the next timed from the end of the
 * last, so passes never overlap), with the time from `now` (the process's clock; tests pass their own). Started by the
 * referral service and the all-in-one start. Several instances at once are safe: a period is claimed by one (SKIP
 * LOCKED) and its close is conditional on it being open.
 */
export function createPeriodCloserLoop(deps: { prisma: PrismaClient; settings: PeriodCloserSettings; log: Logger; now: () => Date }): PeriodCloserLoop {
  return createPassLoop({
    enabled: deps.settings.enabled,
    intervalSeconds: deps.settings.intervalSeconds,
    now: deps.now,
    pass: (now) => closeDuePeriods(deps, deps.settings, now),
    log: deps.log,
    failureText: "period close pass failed; retried at the next interval",
  });
}
