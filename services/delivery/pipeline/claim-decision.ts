/**
 * The dispatcher's claim decisions, as pure functions of its counts and clock: when its loop claims
 * due deliveries and how many, and whether the consumer's insert may lease new rows to it. No I/O
 * and no timers; createDispatcher (dispatcher.ts) holds the state, calls these and acts on the answer.
 */

/**
 * While attempts are in flight, a claim waits until a quarter of the concurrency (or, when the
 * per-server caps bind first, a quarter of what is in flight) has finished since the last claim,
 * or this long: a busy dispatcher claims in batches, not one row per finished attempt. Never
 * longer: slots held by a slow receiver cannot hold the claim back.
 */
export const CLAIM_BATCH_WINDOW_MS = 5;
/** Claims and insert leases pause while this many attempts per concurrency slot wait to be recorded (the database is behind). */
export const MAX_UNRECORDED_PER_SLOT = 8;

/** One dispatcher's load now, in attempts. */
export interface DispatcherLoad {
  /** Attempts the dispatcher runs at once, over all servers. */
  concurrency: number;
  /** Attempts claimed or leased whose receiver has not answered yet: what the concurrency bounds. */
  sending: number;
  /** Room handed to an insert's lease whose rows are not tracked yet: a claim meanwhile does not count on it. */
  reserved: number;
  /** Attempts that finished sending and wait to be recorded (the attempt recorder's queue). */
  unrecorded: number;
}

/** What the claim loop knows at one turn. */
export interface ClaimLoopState extends DispatcherLoad {
  /** Attempts that finished sending since the last claim. */
  freedSinceClaim: number;
  /** Since when the loop has waited for more free slots (a `wait` answer's `sinceMs`), or undefined. */
  waitingSinceMs: number | undefined;
  /** The monotonic clock now, in milliseconds. */
  nowMs: number;
}

/** Why a claim or an insert lease does not happen now. */
export type HoldReason = "full" | "recording-behind";

/**
 * The claim loop's next step:
 * - `claim`: claim up to `limit` due rows now;
 * - `wait`: attempts are in flight and too few have finished to make a batch; sleep until `untilMs`
 *   (or a wake) and decide again, keeping `sinceMs` as the state's `waitingSinceMs`;
 * - `poll`: no claim (no free slot, or the attempt recorder is behind); sleep the poll interval or
 *   until a wake. The state's `waitingSinceMs` is kept as it was.
 */
export type ClaimDecision = { kind: "claim"; limit: number } | { kind: "wait"; sinceMs: number; untilMs: number } | { kind: "poll"; reason: HoldReason };

/** Whether the consumer's insert may lease new rows to this dispatcher, and how many. */
export type InsertLeaseDecision = { kind: "lease"; limit: number } | { kind: "none"; reason: HoldReason | "stopped" | "claiming" | "backlog" };

/** Free slots: the concurrency less what is sending and what an insert's lease holds. */
export function freeSlots(load: DispatcherLoad): number {
  return load.concurrency - load.sending - load.reserved;
}

/** The database is behind: too many finished attempts wait to be recorded to take on more. */
export function isRecordingBehind(load: DispatcherLoad): boolean {
  return load.unrecorded >= load.concurrency * MAX_UNRECORDED_PER_SLOT;
}

/** The smallest batch a busy dispatcher claims: a quarter of its concurrency, at least one. */
export function minimumClaim(concurrency: number): number {
  return Math.max(1, Math.floor(concurrency / 4));
}

/**
 * Decides the claim loop's next step. An idle dispatcher (nothing sending) claims at once whatever
 * room it has. A busy one claims when enough has finished since the last claim (a quarter of the
 * concurrency, or of what was in flight when the per-server caps bind first) and it has room for at
 * least the minimum batch; otherwise it waits for more, for at most CLAIM_BATCH_WINDOW_MS from when
 * it began waiting, then claims what room it has.
 */
export function decideClaim(state: ClaimLoopState): ClaimDecision {
  const room = freeSlots(state);
  if (room <= 0) return { kind: "poll", reason: "full" };
  if (isRecordingBehind(state)) return { kind: "poll", reason: "recording-behind" };
  if (state.sending > 0 && !isBatchReady(state, room)) {
    const sinceMs = state.waitingSinceMs ?? state.nowMs;
    const untilMs = sinceMs + CLAIM_BATCH_WINDOW_MS;
    if (state.nowMs < untilMs) return { kind: "wait", sinceMs, untilMs };
  }
  return { kind: "claim", limit: room };
}

/** Enough has finished since the last claim to claim a batch, and there is room for one. */
function isBatchReady(state: ClaimLoopState, room: number): boolean {
  const minClaim = minimumClaim(state.concurrency);
  const finishedNeeded = Math.min(minClaim, Math.ceil((state.sending + state.freedSinceClaim) / 4));
  return room >= minClaim && state.freedSinceClaim >= finishedNeeded;
}

/**
 * A claim that filled its limit may have left due rows behind: the loop claims again at once, and
 * inserts lease nothing until a claim comes back short (older rows go before new ones).
 */
export function leavesBacklog(claimed: number, limit: number): boolean {
  return claimed === limit;
}

/**
 * Decides whether the consumer's insert may lease its new rows to this dispatcher: only while it
 * runs, no claim statement is running (the claim counts on the same room), the last claim left no
 * due rows behind (they go first), the attempt recorder keeps up, and there is a free slot. The
 * lease's limit is all the free room.
 */
export function decideInsertLease(state: DispatcherLoad & { active: boolean; claiming: boolean; backlog: boolean }): InsertLeaseDecision {
  if (!state.active) return { kind: "none", reason: "stopped" };
  if (state.claiming) return { kind: "none", reason: "claiming" };
  if (state.backlog) return { kind: "none", reason: "backlog" };
  if (isRecordingBehind(state)) return { kind: "none", reason: "recording-behind" };
  const room = freeSlots(state);
  if (room <= 0) return { kind: "none", reason: "full" };
  return { kind: "lease", limit: room };
}
