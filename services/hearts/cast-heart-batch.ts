import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { HeartCountedSchema } from "../../gen/proto/events/v1/events_pb.js";
import { HEARTS_TOPIC } from "../shared/adapters/bus.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { Overloaded, unknownServer } from "../shared/rpc/errors.js";
import {
  ADMISSION_MAX_QUEUE_WAIT_MS,
  ADMISSION_MAX_TOTAL_WAIT_MS,
  claimKeys,
  createGroupCommit,
  type GroupCommit,
  type ItemOutcome,
  type QueueQuota,
} from "../shared/runtime/group-commit.js";
import { toOutboxRow } from "../shared/adapters/outbox.js";
import { timeOrderedId } from "../shared/values/ids.js";
import { addressPseudonyms, currentAddressKey } from "../shared/values/address-key.js";
import { periodOf } from "../shared/values/period.js";
import type { FraudRules } from "./domain/fraud-rules.js";
import type { VoterAddress } from "./domain/ip.js";
import { NO_PLATFORM_IDS, type PlatformIds } from "../shared/values/player-ids.js";
import { fraudReadLimits, fraudWindows, scoreHeart } from "./domain/score-heart.js";
import { HEART_COOLDOWN_MS, nextStreak } from "./domain/streak.js";
import { readHeartContexts, writeHearts, type HeartRecord, type HeartWrite } from "./store.js";

/** Times one heart may lose its voter row to a concurrent writer before it is refused as overloaded (nothing written). */
const MAX_ATTEMPTS = 5;
/** The retry hint given with that refusal: the contention is another instance's write, gone within moments. */
const CONTENDED_RETRY_AFTER_MS = 100;

/** Bounds of the CastHeart group commit; tests shrink them. */
export interface CastHeartBatchOptions {
  /** Most hearts decided and written together (one read and one write statement). */
  maxBatch?: number;
  /** Most hearts waiting for a batch; beyond it CastHeart answers resource_exhausted with a retry hint. */
  maxQueue?: number;
  /** A heart that waited this long for capacity is refused (resource_exhausted) instead of cast: well inside callers' deadlines. */
  maxQueueWaitMs?: number;
  /** Batches in flight at once (each uses one pooled connection at a time). */
  maxInFlight?: number;
  /** A heart that waited this long in all (capacity, and behind earlier casts of its voter, IP or subnet) is refused. */
  maxTotalWaitMs?: number;
  /**
   * Most casts of one IP, or of one (server, subnet), waiting at once; a cast past it is refused at once
   * (resource_exhausted with a retry hint). They run one per batch, so this also bounds their wait.
   */
  maxQueuedPerAddress?: number;
  /** Most casts of one subnet (any server) waiting at once. */
  maxQueuedPerSubnet?: number;
  /** Most casts for one server waiting at once (a share of maxQueue, so one server's crowd cannot fill it). */
  maxQueuedPerServer?: number;
}

/** The bounds in production. */
export const CAST_HEART_BATCH_DEFAULTS: Required<CastHeartBatchOptions> = {
  maxBatch: 128,
  maxQueue: 4_096,
  maxQueueWaitMs: ADMISSION_MAX_QUEUE_WAIT_MS,
  maxInFlight: 2,
  maxTotalWaitMs: ADMISSION_MAX_TOTAL_WAIT_MS,
  maxQueuedPerAddress: 32,
  maxQueuedPerSubnet: 128,
  maxQueuedPerServer: 1_024,
};

/** One validated cast, as the use case hands it to the queue. */
export interface HeartCast {
  serverId: string;
  username: string;
  voterIdentity: string;
  userAgent: string;
  address: VoterAddress;
  /** The voter's platform ids, validated and in normal form (services/shared/values/player-ids.ts); none when omitted. */
  ids?: PlatformIds;
  /** The cast time (the caller's clock when the call arrived). */
  at: Date;
}

/** How one cast ended; `heart` is what was stored. */
export type HeartCastResult =
  | { kind: "fraud"; heart: HeartRecord }
  | { kind: "cooldown"; heart: HeartRecord; nextEligibleAt: Date }
  | { kind: "counted"; heart: HeartRecord; streakDay: number };

/**
 * The referral service's CastHeart queue: concurrent casts are decided and written
 * together (castHeartBatch). Casts sharing a voter row, an IP or a (server, subnet)
 * never run in one batch nor in two batches at once, so each one's fraud counts see
 * every earlier heart, as if cast one by one. Beyond capacity, past its address's, subnet's
 * or server's share of the queue (castQuotas), or after waiting maxTotalWaitMs in all, callers
 * get `Overloaded` (resource_exhausted with a retry hint; nothing written).
 */
export function createCastHeartQueue(deps: CoreDeps, rules: FraudRules, opts: CastHeartBatchOptions = {}): GroupCommit<HeartCast, HeartCastResult> {
  const bounds = { ...CAST_HEART_BATCH_DEFAULTS, ...opts };
  return createGroupCommit<HeartCast, HeartCastResult>({
    runBatch: (casts) => castHeartBatch(deps, rules, casts),
    keysOf: castKeys,
    quotasOf: (cast) => castQuotas(cast, bounds),
    maxBatch: bounds.maxBatch,
    maxQueue: bounds.maxQueue,
    maxQueueWaitMs: bounds.maxQueueWaitMs,
    maxTotalWaitMs: bounds.maxTotalWaitMs,
    maxInFlight: bounds.maxInFlight,
    overloaded: (retryAfterMs) => new Overloaded(retryAfterMs),
  });
}

/**
 * Fair admission: the shares of the queue one IP, one (server, subnet), one subnet and one server may
 * hold. Casts of one IP or (server, subnet) run one per batch (castKeys), so without a share one busy
 * address queued thousands and every other voter was refused (issue 18).
 */
function castQuotas(cast: HeartCast, bounds: Required<CastHeartBatchOptions>): QueueQuota[] {
  return [
    { key: `ip:${cast.address.ip}`, max: bounds.maxQueuedPerAddress },
    { key: `sn:${cast.serverId}:${cast.address.subnet}`, max: bounds.maxQueuedPerAddress },
    { key: `subnet:${cast.address.subnet}`, max: bounds.maxQueuedPerSubnet },
    { key: `server:${cast.serverId}`, max: bounds.maxQueuedPerServer },
  ];
}

/** The rows and counts a cast reads or writes: its voter row, its IP (velocity, any server), its server's subnet. */
function castKeys(cast: HeartCast): string[] {
  return [`v:${cast.serverId}:${cast.voterIdentity}`, `ip:${cast.address.ip}`, `sn:${cast.serverId}:${cast.address.subnet}`];
}

/**
 * Casts many hearts in rounds of two statements each (readHeartContexts, writeHearts).
 * A round holds no two casts sharing a key (castKeys): a later cast of the same voter,
 * IP or subnet waits for the next round, so it sees the earlier one's row and counts
 * (two hearts of one voter in one batch: the first counts, the second is a cooldown).
 *
 * Per-cast isolation: an unknown server is that cast's error only; a cast whose voter
 * row changed under it (another instance counted the voter meanwhile) wrote nothing and
 * is decided again in the next round from a fresh read. A round whose write fails as a
 * whole (a server deleted meanwhile, a lost connection) is retried cast by cast, so the
 * failure reaches only the casts it belongs to.
 */
export async function castHeartBatch(deps: CoreDeps, rules: FraudRules, casts: readonly HeartCast[]): Promise<ItemOutcome<HeartCastResult>[]> {
  const outcomes: ItemOutcome<HeartCastResult>[] = new Array(casts.length);
  const attempts = new Array<number>(casts.length).fill(0);
  let pending = casts.map((_, i) => i);
  while (pending.length > 0) {
    const { round, later } = takeRound(pending, (i) => castKeys(casts[i]!));
    let lost: number[];
    try {
      lost = await castRound(deps, rules, casts, round, outcomes);
    } catch (error) {
      if (round.length === 1) {
        // Failure policy: a one-cast round that fails is that cast's failure (mapped to its Connect code by the interceptor).
        outcomes[round[0]!] = { ok: false, error };
        lost = [];
      } else {
        // Failure policy: the round's statement rolled back as a whole; each cast is retried alone, so one cast's
        // trouble (its server deleted meanwhile) reaches only its caller. Round casts share no key: safe in parallel.
        deps.log.debug({ err: error, hearts: round.length }, "heart batch failed; casting its hearts one by one");
        const alone = await Promise.all(round.map((i) => castAlone(deps, rules, casts, i, outcomes)));
        lost = alone.flat();
      }
    }
    const retry: number[] = [];
    for (const i of lost) {
      attempts[i]!++;
      // Failure policy: a voter row that keeps changing under this cast (contention from other instances) is refused as
      // overloaded, nothing written for it, rather than retried without end.
      if (attempts[i]! >= MAX_ATTEMPTS) outcomes[i] = { ok: false, error: new Overloaded(CONTENDED_RETRY_AFTER_MS) };
      else retry.push(i);
    }
    pending = [...retry, ...later].sort((a, b) => a - b);
  }
  return outcomes;
}

async function castAlone(
  deps: CoreDeps,
  rules: FraudRules,
  casts: readonly HeartCast[],
  i: number,
  outcomes: ItemOutcome<HeartCastResult>[],
): Promise<number[]> {
  try {
    return await castRound(deps, rules, casts, [i], outcomes);
  } catch (error) {
    // Failure policy: this cast's own failure, answered to its caller only.
    outcomes[i] = { ok: false, error };
    return [];
  }
}

/** Takes, in order, the items whose keys no earlier pending item holds (group commit's per-key rule); the rest wait (and keep their order). */
function takeRound(pending: readonly number[], keysOf: (i: number) => readonly string[]): { round: number[]; later: number[] } {
  const round: number[] = [];
  const later: number[] = [];
  const taken = new Set<string>();
  for (const i of pending) (claimKeys(keysOf(i), taken) ? round : later).push(i);
  return { round, later };
}

/**
 * One round: read every cast's context, decide each (unknown server, fraud, cooldown, or
 * an attempt to count), write them all in one statement. Sets the outcome of each cast
 * decided; returns the casts whose count attempt lost to a concurrent writer.
 */
async function castRound(
  deps: CoreDeps,
  rules: FraudRules,
  casts: readonly HeartCast[],
  round: readonly number[],
  outcomes: ItemOutcome<HeartCastResult>[],
): Promise<number[]> {
  const contexts = await readHeartContexts(
    deps.prisma,
    round.map((i) => {
      const c = casts[i]!;
      return { serverId: c.serverId, voterIdentity: c.voterIdentity, ip: c.address.ip, subnet: c.address.subnet, windows: fraudWindows(rules, c.at) };
    }),
    fraudReadLimits(rules),
  );
  const writes: HeartWrite[] = [];
  const writer: number[] = [];
  const results: HeartCastResult[] = [];
  const addressKey = currentAddressKey(deps);
  round.forEach((i, n) => {
    const cast = casts[i]!;
    const context = contexts[n]!;
    if (!context.serverExists) {
      outcomes[i] = { ok: false, error: unknownServer() };
      return;
    }
    const verdict = scoreHeart(rules, { username: cast.username, userAgent: cast.userAgent }, context.counts);
    const heart: HeartRecord = {
      id: timeOrderedId(),
      serverId: cast.serverId,
      username: cast.username,
      voterIdentity: cast.voterIdentity,
      ip: cast.address.ip,
      subnet: cast.address.subnet,
      ...addressPseudonyms(addressKey, cast.address),
      userAgent: cast.userAgent,
      ids: cast.ids ?? NO_PLATFORM_IDS,
      fraudScore: verdict.score,
      fraudReasons: verdict.reasons,
      period: periodOf(cast.at),
      at: cast.at,
    };
    writer.push(i);
    if (verdict.blocked) {
      writes.push({ kind: "fraud", heart });
      results.push({ kind: "fraud", heart });
      return;
    }
    // last_counted_at only ever moves forward, so a row read inside the cooldown stays inside it: final.
    const last = context.state?.lastCountedAt.getTime();
    if (last !== undefined && last > cast.at.getTime() - HEART_COOLDOWN_MS) {
      writes.push({ kind: "cooldown", heart });
      results.push({ kind: "cooldown", heart, nextEligibleAt: new Date(last + HEART_COOLDOWN_MS) });
      return;
    }
    const streakDay = nextStreak(context.state, cast.at);
    writes.push({ kind: "count", heart, streakDay, outbox: heartCountedOutbox(heart, streakDay) });
    results.push({ kind: "counted", heart, streakDay });
  });
  const won = await writeHearts(deps.prisma, writes);
  const lost: number[] = [];
  writes.forEach((write, n) => {
    const i = writer[n]!;
    if (write.kind === "count" && !won.has(n)) lost.push(i);
    else outcomes[i] = { ok: true, value: results[n]! };
  });
  return lost;
}

/** The heart.counted outbox row of a heart that counts. */
function heartCountedOutbox(heart: HeartRecord, streakDay: number) {
  return toOutboxRow({
    topic: HEARTS_TOPIC,
    type: "heart.counted",
    serverId: heart.serverId,
    occurredAt: heart.at,
    payload: {
      case: "heartCounted",
      value: create(HeartCountedSchema, {
        heartId: heart.id,
        serverId: heart.serverId,
        username: heart.username,
        voterIdentity: heart.voterIdentity,
        period: heart.period,
        countedAt: timestampFromDate(heart.at),
        streakDay,
        steamId: heart.ids.steamId ?? "",
        discordId: heart.ids.discordId ?? "",
        minecraftUuid: heart.ids.minecraftUuid ?? "",
        accountId: heart.ids.accountId ?? "",
        nextEligibleAt: timestampFromDate(new Date(heart.at.getTime() + HEART_COOLDOWN_MS)),
      }),
    },
  });
}
