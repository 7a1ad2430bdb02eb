import { create } from "@bufbuild/protobuf";
import { Prisma } from "../../gen/prisma/client.js";
import { ReferralTransitionedSchema } from "../../gen/proto/events/v1/events_pb.js";
import { REFERRALS_TOPIC } from "../shared/adapters/bus.js";
import { ERROR_TEXT } from "../shared/values/contract.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError, IllegalTransition, Overloaded } from "../shared/rpc/errors.js";
import { ADMISSION_MAX_QUEUE_WAIT_MS, createGroupCommit, type GroupCommit, type ItemOutcome } from "../shared/runtime/group-commit.js";
import { insertOutboxRows, toOutboxRow, type OutboxEvent, type OutboxRow } from "../shared/adapters/outbox.js";
import { timeOrderedId } from "../shared/values/ids.js";
import { periodOf } from "../shared/values/period.js";
import { isTransactionUnavailable, runSqlTransaction, type SqlTx } from "../shared/adapters/sql/executor.js";
import type { ApplyEventCommand } from "./domain/commands.js";
import { decideRegistration, type AnchorView } from "./domain/first-touch.js";
import { decide, isAnchorState, type AnchorState, type ReferralStateName } from "./domain/transitions.js";
import { decideReversalEffect, isPastAttributionWindow, NO_REASON, type ReversalEffect, type StoredReason } from "./domain/reversal-rules.js";
import { ABUSE_SIGNAL_CODES, DEFAULT_ABUSE_RULES, type AbuseRules } from "./domain/abuse-signals.js";
import { oldestDueRowsSql, oldestOfAgeKey, statementRule, type RetentionRule } from "../shared/adapters/retention-rule.js";
import { abuseWriteOf, needsAbuseFacts, readAbuseFacts, type AbuseFactsInput, type AbuseWrite, type BackFlag } from "./abuse-facts.js";

/** Most events applied in one batch. */
export const APPLY_EVENT_MAX_BATCH = 64;
/** Most events waiting for a batch; beyond it ApplyEvent answers resource_exhausted with a retry hint. */
export const APPLY_EVENT_MAX_QUEUE = 2_048;
/** Batches in flight at once (each holds one pooled connection). */
export const APPLY_EVENT_MAX_IN_FLIGHT = 2;
/**
 * When a second batch may run beside the first (services/shared/runtime/group-commit.ts `coalesce`): once this many events
 * wait, or the oldest has waited `maxWaitMs`. A lone event still starts at once. At low concurrency (8 callers) a
 * second round no longer starts for each event that arrives while one runs: arrivals gather for up to 2 ms, so each
 * round's fixed cost (its transaction, four round trips, a commit, the service's CPU around them) is shared by more
 * events (issue 22: 720 us of CPU per event at c=8 against 451 at c=32), while the two rounds still overlap - a round
 * waits on PostgreSQL (its commit) most of its time, and that wait is what the second slot hides. Under load the
 * queue holds 4 at once and nothing waits.
 */
export const APPLY_EVENT_COALESCE = { minItems: 4, maxWaitMs: 2 } as const;
/** Reruns of one event after a lost conditional write (version, click link, anchor mint); one more loss answers `internal error`. */
export const MAX_TRANSACTION_RETRIES = 3;
/**
 * The transaction limits of one round (milliseconds; runSqlTransaction's `maxWaitMs` and `timeoutMs`, Prisma's names):
 * - `maxWait`, how long a round may wait for a pooled connection. No connection by then means the
 *   database is saturated, and the round's events are refused as overloaded (retryable, this wait as
 *   the retry hint) inside the gateway's RPC deadline (gateway/server.ts RPC_TIMEOUT_MS, 10 s),
 *   instead of queueing more work.
 * - `timeout`, how long one round may run before Prisma rolls it back: a bound for a stuck
 *   transaction (a lock wait), so its connection returns to the pool; nothing it wrote stays.
 */
export const APPLY_EVENT_TRANSACTION_LIMITS_MS = { maxWait: 5_000, timeout: 15_000 } as const;

/** The result of ApplyEvent, as the contract's 200 bodies distinguish them. */
export type ApplyEventResult =
  | { kind: "applied"; referralId: string; state: AnchorState; advanced: boolean }
  | { kind: "duplicate" }
  | { kind: "first_touch_conflict" };

/** Settings of the ApplyEvent group commit (the APPLY_EVENT_* defaults when omitted; tests shrink them). */
export interface ApplyEventBatchOptions {
  maxBatch?: number;
  maxQueue?: number;
  maxQueueWaitMs?: number;
  maxInFlight?: number;
  coalesce?: { minItems: number; maxWaitMs: number };
}

/**
 * The referral service's ApplyEvent queue, the one way events are applied: concurrent events are
 * applied together (applyEventBatch; a lone event is a batch of one), two events of one token or one
 * (server, referee) never in one batch, and beyond capacity callers get `Overloaded`
 * (resource_exhausted, retryable).
 */
export function createApplyEventQueue(
  deps: CoreDeps,
  opts: ApplyEventBatchOptions = {},
  abuseRules: AbuseRules = DEFAULT_ABUSE_RULES,
): GroupCommit<ApplyEventCommand, ApplyEventResult> {
  return createGroupCommit<ApplyEventCommand, ApplyEventResult>({
    runBatch: (commands) => applyEventBatch(deps, commands, abuseRules),
    keysOf: batchKeys,
    maxBatch: opts.maxBatch ?? APPLY_EVENT_MAX_BATCH,
    maxQueue: opts.maxQueue ?? APPLY_EVENT_MAX_QUEUE,
    maxQueueWaitMs: opts.maxQueueWaitMs ?? ADMISSION_MAX_QUEUE_WAIT_MS,
    maxInFlight: opts.maxInFlight ?? APPLY_EVENT_MAX_IN_FLIGHT,
    coalesce: opts.coalesce ?? APPLY_EVENT_COALESCE,
    overloaded: (retryAfterMs) => new Overloaded(retryAfterMs),
  });
}

/** The rows an event may write: its token's click and, for `registered`, the (server, referee) anchor. */
function batchKeys(command: ApplyEventCommand): string[] {
  const keys = [`t:${command.token}`];
  if (command.refereeIdentity !== null) keys.push(`r:${command.serverId}:${command.refereeIdentity}`);
  return keys;
}

/**
 * Thrown inside a round's transaction to roll it all back: a click linked concurrently after this
 * round minted the anchor it was to be linked to. Also the error of an event that lost more than
 * MAX_TRANSACTION_RETRIES races (the interceptor answers it `internal error`, retryable).
 */
class LostRace extends Error {
  constructor(what: string) {
    super(`lost a concurrent write: ${what}`);
    this.name = "LostRace";
  }
}

/**
 * Applies many events (no two sharing a token or a registered referee) in rounds; each round is ONE
 * transaction of two statements (plus a third only after a lost race):
 *
 *  1. read + dedup (statement 1, readAndDedup): every token's click, the dedup rows (`INSERT ... ON CONFLICT DO
 *     NOTHING`, only for tokens of the caller's server), and the anchors each event is decided on
 *     (the referee's and the one the click is linked to);
 *  2. in memory, each event is decided (planEvent: decideRegistration, the transition table);
 *  3. write (statement 2, writePlans): mints, click links, conditional state writes (on the version read),
 *     credits, outbox rows and outcomes, each part depending on the write it follows (nothing is
 *     written for an event whose mint or state write lost), and the dedup rows of events answered
 *     with an error are deleted (an error outcome leaves nothing, as a rollback would).
 *
 * Anti-abuse (services/referral/abuse-facts.ts): when an event of the round mints or qualifies a referral on a
 * server whose review mode is not `off`, one more statement reads those events' facts (bounded counts) between
 * statements 1 and 2; the pure rules decide the signals and review state, and statement 2 stores them with the
 * mint or the qualification. With review off nothing is read for it (no statement), and no answer changes.
 *
 * Per-event isolation: a 404/422 is that event's outcome only. An event whose conditional write lost
 * to a concurrent transaction (another instance), or that would advance a referral another event of
 * the round advances, leaves nothing behind and is decided again from fresh reads in the next round,
 * with the other such events. An event that lost MAX_TRANSACTION_RETRIES + 1 races is answered with
 * LostRace (500 `internal error`, retryable; nothing of it written). A round that fails as a whole is
 * rerun event by event, each in a round of one, so one event's trouble reaches only its caller.
 */
export async function applyEventBatch(
  deps: CoreDeps,
  commands: readonly ApplyEventCommand[],
  abuseRules: AbuseRules = DEFAULT_ABUSE_RULES,
): Promise<ItemOutcome<ApplyEventResult>[]> {
  const outcomes: ItemOutcome<ApplyEventResult>[] = new Array(commands.length);
  const losses = new Array<number>(commands.length).fill(0);
  let pending = commands.map((_, i) => i);
  while (pending.length > 0) {
    const { lost, deferred } = await settleRound(deps, commands, pending, outcomes, abuseRules);
    const rerun = [...deferred];
    for (const i of lost) {
      losses[i]!++;
      // Failure policy: a conditional write that keeps losing (contention from other instances) is answered as an
      // internal error (retryable; nothing of it was written) after MAX_TRANSACTION_RETRIES reruns, not retried without end.
      if (losses[i]! > MAX_TRANSACTION_RETRIES) outcomes[i] = { ok: false, error: new LostRace(`event ${commands[i]!.serverEventId}, ${losses[i]} times`) };
      else rerun.push(i);
    }
    if (rerun.length > 0) deps.log.debug({ events: rerun.length, lost: lost.length }, "rerunning referral events in a new round");
    // In command order, so a second advance of one referral follows the first.
    pending = rerun.sort((a, b) => a - b);
  }
  return outcomes;
}

/** What a round leaves for the next one (indexes into the batch's commands). */
interface RoundLeft {
  /** Lost a conditional write: rerun, and counted against MAX_TRANSACTION_RETRIES. */
  lost: number[];
  /** Would advance a referral another event of the round advanced: rerun, not counted (one of them always proceeds). */
  deferred: number[];
}

/** Runs one round (`round`: indexes into `commands`) and sets the outcome of every event it settles. */
async function settleRound(
  deps: CoreDeps,
  commands: readonly ApplyEventCommand[],
  round: readonly number[],
  outcomes: ItemOutcome<ApplyEventResult>[],
  abuseRules: AbuseRules,
): Promise<RoundLeft> {
  const events = round.map((i) => commands[i]!);
  let applied: RoundResult;
  try {
    // On node-postgres without Prisma's interactive-transaction machinery (runSqlTransaction, services/shared/adapters/sql/executor.ts): issue 22.
    applied = await runSqlTransaction(deps.prisma, (tx) => applyRound(tx, events, deps.now(), abuseRules), {
      maxWaitMs: APPLY_EVENT_TRANSACTION_LIMITS_MS.maxWait,
      timeoutMs: APPLY_EVENT_TRANSACTION_LIMITS_MS.timeout,
    });
  } catch (error) {
    // Failure policy: no connection within its maxWait (or the transaction expired) means the database is
    // saturated and nothing of this round committed: its events are refused as overloaded (retryable, nothing
    // written) instead of queueing more work behind them or answering `internal error`.
    if (isTransactionUnavailable(error)) {
      deps.log.warn({ events: round.length }, "referral event round refused: no database transaction in time");
      for (const i of round) outcomes[i] = { ok: false, error: new Overloaded(APPLY_EVENT_TRANSACTION_LIMITS_MS.maxWait) };
      return { lost: [], deferred: [] };
    }
    if (round.length === 1) {
      // Failure policy: a round of one rolled back. A lost click link (after its mint) is a lost race like any other,
      // rerun from fresh reads; anything else (a lost connection, a deadlock) is this event's failure, answered
      // `internal error` (retryable) by the interceptor, which logs the cause. Nothing of it committed.
      if (error instanceof LostRace) return { lost: [round[0]!], deferred: [] };
      outcomes[round[0]!] = { ok: false, error };
      return { lost: [], deferred: [] };
    }
    // Failure policy: the round rolled back as a whole (a lost click link after a mint, a deadlock with another
    // instance, a lost connection): each event is rerun in a round of its own, so one event's trouble reaches only
    // its caller. They run concurrently: their tokens and referees differ, and two advances of one referral are
    // decided by the conditional write (the loser reruns).
    deps.log.debug({ err: error, events: round.length }, "referral event round failed; rerunning its events one by one");
    const alone = await Promise.all(round.map((i) => settleRound(deps, commands, [i], outcomes, abuseRules)));
    return { lost: alone.flatMap((a) => a.lost), deferred: alone.flatMap((a) => a.deferred) };
  }
  const lost: number[] = [];
  const deferred: number[] = [];
  applied.forEach((result, n) => {
    const i = round[n]!;
    if (result === "lost") lost.push(i);
    else if (result === "deferred") deferred.push(i);
    else outcomes[i] = result;
  });
  return { lost, deferred };
}

/** Per event of a round: its answer, or what the next round does with it. */
type RoundResult = Array<ItemOutcome<ApplyEventResult> | "lost" | "deferred">;

interface ReadRow {
  idx: number;
  /** The click's server's anti-abuse review mode: anything but `off` makes a mint or qualification read its facts. */
  review_mode: string | null;
  click_id: string | null;
  click_server_id: string | null;
  click_referrer: string | null;
  /** referral_events.id (bigint) as text: node-postgres returns bigint as a string. */
  event_id: string | null;
  linked_id: string | null;
  linked_referrer: string | null;
  linked_referee: string | null;
  linked_state: string | null;
  linked_version: number | null;
  referee_id: string | null;
  referee_referrer: string | null;
  referee_state: string | null;
  // Referral rules (R2, R3): the click's time, its server's window and lock, the linked anchor's qualification.
  click_created_at: Date | null;
  window_days: number | null;
  lock_days: number | null;
  linked_qualified_at: Date | null;
}

/** What the write statement does for one event. */
type Plan =
  /** Nothing to write: a 404 (no dedup row was inserted) or a duplicate. */
  | { kind: "answer"; outcome: ItemOutcome<ApplyEventResult> }
  /** A 422/400 after the dedup row was inserted: the row is deleted. */
  | { kind: "error"; eventId: string; error: unknown }
  /** No state change: record the outcome (idempotent, first_touch_conflict). */
  | { kind: "record"; eventId: string; outcome: "idempotent" | "first_touch_conflict"; referralId: string | null; result: ApplyEventResult }
  /** Idempotent `registered` through another token of the same referrer: link the click, then record. */
  | { kind: "join"; eventId: string; clickId: string; anchorId: string; result: ApplyEventResult }
  | { kind: "mint"; eventId: string; id: string; serverId: string; referee: string; referrer: string; clickId: string; outbox: OutboxRow }
  | {
      kind: "advance";
      eventId: string;
      referralId: string;
      version: number;
      to: AnchorState;
      reverseCredit: boolean;
      /** `reversed` only: the reason stored and whether it is a clawback (R1, R3). */
      reversal: ReversalWrite;
      serverId: string;
      referrer: string;
      outbox: OutboxRow;
      result: ApplyEventResult;
    }
  /** A second advance of one referral in this round: rerun in the next round (its dedup row is deleted here). */
  | { kind: "defer"; eventId: string };

/** One round, inside its transaction: read, decide, write; returns each event's answer or its rerun. */
async function applyRound(tx: SqlTx, commands: readonly ApplyEventCommand[], now: Date, abuseRules: AbuseRules): Promise<RoundResult> {
  const rows = await readAndDedup(tx, commands, now);
  const byIdx = new Map(rows.map((r) => [r.idx, r]));
  const advancing = new Set<string>();
  const plans = commands.map((command, idx): Plan => {
    const row = byIdx.get(idx);
    try {
      return planEvent(command, row, now, advancing);
    } catch (error) {
      // Failure policy: a domain rejection (422, 400) is this event's answer; its dedup row is deleted by the write.
      if (row?.event_id == null) return { kind: "answer", outcome: { ok: false, error } };
      return { kind: "error", eventId: row.event_id, error };
    }
  });

  const written = await writePlans(tx, plans, now, await abuseWrites(tx, plans, byIdx, abuseRules, now));
  const lostEventIds: string[] = [];
  const results: RoundResult = [];
  plans.forEach((plan, idx) => {
    const settle = (result: ApplyEventResult, ok: boolean, eventId: string) => {
      if (ok) results.push({ ok: true, value: result });
      else {
        lostEventIds.push(eventId);
        results.push("lost");
      }
    };
    switch (plan.kind) {
      case "answer":
        results.push(plan.outcome);
        return;
      case "error":
        results.push({ ok: false, error: plan.error });
        return;
      case "record":
        results.push({ ok: true, value: plan.result });
        return;
      case "defer":
        results.push("deferred"); // its dedup row was deleted by the write statement already
        return;
      case "join":
        settle(plan.result, written.joinLinked.has(idx), plan.eventId);
        return;
      case "advance":
        settle(plan.result, written.advanced.has(idx), plan.eventId);
        return;
      case "mint":
        // Not minted: another transaction anchored the referee first; decided afresh in the next round.
        if (written.minted.has(idx) && !written.mintLinked.has(idx)) throw new LostRace(`click ${plan.clickId} was linked concurrently`);
        settle({ kind: "applied", referralId: plan.id, state: "registered", advanced: true }, written.minted.has(idx), plan.eventId);
        return;
    }
  });
  if (lostEventIds.length > 0) {
    // The events that lost a race wrote nothing but their dedup rows; those go, so the rerun inserts them afresh.
    await tx.query(Prisma.sql`DELETE FROM referral_events WHERE id = ANY(${lostEventIds}::bigint[])`);
  }
  return results;
}

/** Statement 1: clicks, dedup rows (only for tokens of the caller's server) and the anchors, per event. */
function readAndDedup(tx: SqlTx, commands: readonly ApplyEventCommand[], now: Date): Promise<ReadRow[]> {
  return tx.query<ReadRow>(Prisma.sql`
    WITH input AS (
      SELECT * FROM unnest(
        ${commands.map((c) => c.token)}::text[], ${commands.map((c) => c.event)}::text[], ${commands.map((c) => c.serverEventId)}::text[],
        ${commands.map((c) => c.serverId)}::uuid[], ${commands.map((c) => c.kid)}::text[],
        ${commands.map((c) => (c.callerTs === null ? null : c.callerTs.toString()))}::bigint[], ${commands.map((c) => c.refereeIdentity)}::text[],
        ${commands.map((c) => c.reason?.reason ?? null)}::text[], ${commands.map((c) => c.reason?.text ?? null)}::text[]
      ) WITH ORDINALITY AS i(token, type, server_event_id, server_id, kid, caller_ts, referee, reason, reason_text, ord)
    ), click AS (
      SELECT i.ord, c.id, c.server_id, c.referrer_identity, c.referral_id, c.created_at,
             s.attribution_window_days AS window_days, s.lock_days, s.referral_review_mode::text AS review_mode
      FROM input i JOIN referral_clicks c ON c.token = i.token JOIN servers s ON s.id = c.server_id
    ), inserted AS (
      INSERT INTO referral_events (token, type, server_event_id, server_id, outcome, kid, caller_ts, received_at, reason, reason_text)
      SELECT i.token, i.type, i.server_event_id, c.server_id, 'pending', i.kid, i.caller_ts, ${now}::timestamptz, i.reason, i.reason_text
      FROM input i JOIN click c ON c.ord = i.ord
      WHERE c.server_id = i.server_id
      ORDER BY i.ord
      ON CONFLICT (token, type, server_event_id) DO NOTHING
      RETURNING id, token
    )
    SELECT (i.ord - 1)::int AS idx, c.id::text AS click_id, c.server_id::text AS click_server_id, c.referrer_identity AS click_referrer,
           e.id::text AS event_id,
           l.id::text AS linked_id, l.referrer_identity AS linked_referrer, l.referee_identity AS linked_referee,
           l.state::text AS linked_state, l.version AS linked_version,
           r.id::text AS referee_id, r.referrer_identity AS referee_referrer, r.state::text AS referee_state,
           c.created_at AS click_created_at, c.window_days, c.lock_days, l.qualified_at AS linked_qualified_at, c.review_mode
    FROM input i
    LEFT JOIN click c ON c.ord = i.ord
    LEFT JOIN inserted e ON e.token = i.token
    LEFT JOIN referrals l ON l.id = c.referral_id
    LEFT JOIN referrals r ON i.referee IS NOT NULL AND r.server_id = c.server_id AND r.referee_identity = i.referee`);
}

/** Decides one event from its row (throws the event's DomainError). */
function planEvent(command: ApplyEventCommand, row: ReadRow | undefined, now: Date, advancing: Set<string>): Plan {
  // Ruling 10: the token is checked before dedup, so another server's token is a 404 even on replay.
  if (!row || row.click_id === null || row.click_server_id !== command.serverId) {
    throw new DomainError("unknown_token", ERROR_TEXT.unknownToken);
  }
  if (row.event_id === null) return { kind: "answer", outcome: { ok: true, value: { kind: "duplicate" } } };
  const eventId = row.event_id;
  const linked = anchorOf(row.linked_id, row.linked_referrer, row.linked_state);

  if (command.event === "registered") {
    const referee = command.refereeIdentity;
    if (referee === null) throw new DomainError("invalid_argument", ERROR_TEXT.refereeRequired);
    refuseOutsideAttributionWindow(row, now);
    const decision = decideRegistration({
      clickReferrer: row.click_referrer!,
      refereeAnchor: anchorOf(row.referee_id, row.referee_referrer, row.referee_state),
      linkedAnchor: linked,
    });
    switch (decision.kind) {
      case "first_touch_conflict":
        return { kind: "record", eventId, outcome: "first_touch_conflict", referralId: null, result: { kind: "first_touch_conflict" } };
      case "join": {
        const result: ApplyEventResult = { kind: "applied", referralId: decision.anchorId, state: decision.state, advanced: false };
        if (decision.link) return { kind: "join", eventId, clickId: row.click_id, anchorId: decision.anchorId, result };
        return { kind: "record", eventId, outcome: "idempotent", referralId: decision.anchorId, result };
      }
      case "mint": {
        // First touch is decided by the unique (server_id, referee_identity) index at the write, not by this read.
        const id = timeOrderedId();
        const outbox = toOutboxRow(
          transitionEvent({
            referralId: id,
            serverId: row.click_server_id,
            referrerIdentity: row.click_referrer!,
            refereeIdentity: referee,
            from: "clicked",
            to: "registered",
            serverEventId: command.serverEventId,
            now,
          }),
        );
        return { kind: "mint", eventId, id, serverId: row.click_server_id, referee, referrer: row.click_referrer!, clickId: row.click_id, outbox };
      }
    }
  }

  // qualified / reversed: the anchor is resolved from (token, server_id); referee_identity is not needed.
  if (!linked) throw new IllegalTransition("clicked", command.event);
  const decision = decide(linked.state, command.event);
  if (decision.kind === "idempotent") {
    const result: ApplyEventResult = { kind: "applied", referralId: linked.id, state: decision.state, advanced: false };
    return { kind: "record", eventId, outcome: "idempotent", referralId: linked.id, result };
  }
  // One advance per referral per round: a second one is decided afresh in the next round, after this one commits.
  if (advancing.has(linked.id)) return { kind: "defer", eventId };
  advancing.add(linked.id);
  const reversal = reversalOf(command, row, linked.state, now);
  const outbox = toOutboxRow(
    transitionEvent({
      referralId: linked.id,
      serverId: row.click_server_id,
      referrerIdentity: linked.referrerIdentity,
      refereeIdentity: row.linked_referee!,
      from: linked.state,
      to: decision.to,
      serverEventId: command.serverEventId,
      now,
      reversal,
    }),
  );
  return {
    kind: "advance",
    eventId,
    referralId: linked.id,
    version: row.linked_version!,
    to: decision.to,
    reverseCredit: decision.to === "reversed" && reversal.effect === "remove_credit",
    reversal,
    serverId: row.click_server_id,
    referrer: linked.referrerIdentity,
    outbox,
    result: { kind: "applied", referralId: linked.id, state: decision.to, advanced: true },
  };
}

/**
 * R2: a `registered` event through a click that has not registered yet (not linked) and is past its
 * server's attribution window: the token no longer registers, the contract's 404. Checked after dedup,
 * so an exact replay of an event applied in time is still a duplicate; a click linked in time goes on.
 */
function refuseOutsideAttributionWindow(row: ReadRow, now: Date): void {
  if (row.linked_id !== null || row.click_created_at === null || row.window_days === null) return;
  if (isPastAttributionWindow({ clickedAt: row.click_created_at, windowDays: row.window_days, now })) {
    throw new DomainError("unknown_token", ERROR_TEXT.unknownToken);
  }
}

/** What an advancing `reversed` writes beside the state: its reason and its effect on the credit (R1, R3). */
interface ReversalWrite {
  reason: StoredReason;
  effect: ReversalEffect | "none";
}

/** The ReversalWrite of an advance (`none` for an advance that is not a reversal). */
function reversalOf(command: ApplyEventCommand, row: ReadRow, from: AnchorState, now: Date): ReversalWrite {
  if (command.event !== "reversed" || from === "reversed") return { reason: NO_REASON, effect: "none" };
  const effect = decideReversalEffect({ from, qualifiedAt: row.linked_qualified_at, lockDays: row.lock_days ?? 0, now });
  return { reason: command.reason ?? NO_REASON, effect };
}

/**
 * Per event index, the anti-abuse signals and review its mint or qualification stores (services/referral/abuse-facts.ts):
 * the facts are read only for mints and qualifications on servers whose review mode is not `off` (none: no statement).
 */
async function abuseWrites(
  tx: SqlTx,
  plans: readonly Plan[],
  rows: ReadonlyMap<number, ReadRow>,
  abuseRules: AbuseRules,
  now: Date,
): Promise<Map<number, AbuseWrite>> {
  const inputs: AbuseFactsInput[] = [];
  plans.forEach((plan, idx) => {
    const row = rows.get(idx);
    const mode = row?.review_mode ?? null;
    if (!row || !needsAbuseFacts(mode)) return;
    if (plan.kind === "mint")
      inputs.push({ idx, stage: "registered", clickId: plan.clickId, referee: plan.referee, referrer: plan.referrer, referralId: null, mode });
    else if (plan.kind === "advance" && plan.to === "qualified" && row.click_id !== null)
      inputs.push({
        idx,
        stage: "qualified",
        clickId: row.click_id,
        referee: row.linked_referee ?? "",
        referrer: plan.referrer,
        referralId: plan.referralId,
        mode,
      });
  });
  const facts = await readAbuseFacts(tx, inputs, abuseRules, now);
  const writes = new Map<number, AbuseWrite>();
  for (const input of inputs) {
    const row = facts.get(input.idx);
    if (row) writes.set(input.idx, abuseWriteOf(input, row, abuseRules));
  }
  return writes;
}

function anchorOf(id: string | null, referrer: string | null, state: string | null): AnchorView | null {
  if (id === null || referrer === null || state === null) return null;
  if (!isAnchorState(state)) throw new Error(`referral ${id} has an unknown state`);
  return { id, referrerIdentity: referrer, state };
}

interface Written {
  minted: Set<number>;
  mintLinked: Set<number>;
  advanced: Set<number>;
  joinLinked: Set<number>;
}

/**
 * Statement 2: every write of the round in one statement. Each part reads the RETURNING of
 * the write it depends on, so an event whose mint or conditional write lost writes nothing
 * else (its dedup row stays 'pending' and is deleted by applyRound before the rerun).
 */
async function writePlans(tx: SqlTx, plans: readonly Plan[], now: Date, abuse: ReadonlyMap<number, AbuseWrite>): Promise<Written> {
  const mints: Array<Extract<Plan, { kind: "mint" }> & { idx: number }> = [];
  const advances: Array<Extract<Plan, { kind: "advance" }> & { idx: number }> = [];
  const joins: Array<Extract<Plan, { kind: "join" }> & { idx: number }> = [];
  const records: Array<Extract<Plan, { kind: "record" }>> = [];
  const dropped: string[] = [];
  plans.forEach((plan, idx) => {
    if (plan.kind === "mint") mints.push({ ...plan, idx });
    else if (plan.kind === "advance") advances.push({ ...plan, idx });
    else if (plan.kind === "join") joins.push({ ...plan, idx });
    else if (plan.kind === "record") records.push(plan);
    else if (plan.kind === "error" || plan.kind === "defer") dropped.push(plan.eventId);
  });
  if (mints.length + advances.length + joins.length + records.length + dropped.length === 0) {
    return { minted: new Set(), mintLinked: new Set(), advanced: new Set(), joinLinked: new Set() };
  }
  const period = periodOf(now);
  const outbox = [...mints, ...advances].map((p) => ({ idx: p.idx, row: p.outbox }));
  const flags = [...abuse].map(([idx, w]) => ({ idx, ...w }));
  const backFlags = [...abuse.values()].flatMap((w) => w.backFlags);
  const [row] = await tx.query<{ minted: number[]; mint_linked: number[]; advanced: number[]; join_linked: number[] }>(Prisma.sql`
    WITH m AS (
      SELECT * FROM unnest(
        ${mints.map((m) => m.idx)}::int[], ${mints.map((m) => m.id)}::uuid[], ${mints.map((m) => m.serverId)}::uuid[],
        ${mints.map((m) => m.referee)}::text[], ${mints.map((m) => m.referrer)}::text[], ${mints.map((m) => m.clickId)}::uuid[],
        ${mints.map((m) => m.eventId)}::bigint[]
      ) AS t(idx, id, server_id, referee, referrer, click_id, event_id)
    ), abuse AS (
      -- Anti-abuse signals and review of mints and qualifications (services/referral/abuse-facts.ts).
      SELECT idx, ARRAY(SELECT jsonb_array_elements_text(signals::jsonb)) AS signals, details::jsonb AS details, review::"ReferralReview" AS review
      FROM unnest(${flags.map((f) => f.idx)}::int[], ${flags.map((f) => f.signals)}::text[], ${flags.map((f) => f.details)}::text[], ${flags.map((f) => f.review)}::text[])
        AS t(idx, signals, details, review)
    ), minted AS (
      INSERT INTO referrals (id, server_id, referee_identity, referrer_identity, state, version, registered_at, signals, signal_details, review)
      SELECT id, server_id, referee, referrer, 'registered'::"ReferralState", 1, ${now}::timestamptz,
             coalesce(abuse.signals, '{}'), coalesce(abuse.details, '{}'), coalesce(abuse.review, 'none')
      FROM m LEFT JOIN abuse USING (idx) ORDER BY idx
      ON CONFLICT (server_id, referee_identity) DO NOTHING
      RETURNING id
    ), mint_ok AS (
      SELECT m.* FROM m JOIN minted ON minted.id = m.id
    ), mint_linked AS (
      UPDATE referral_clicks c SET referral_id = mint_ok.id FROM mint_ok
      WHERE c.id = mint_ok.click_id AND c.referral_id IS NULL
      RETURNING mint_ok.idx
    ), p AS (
      SELECT * FROM unnest(
        ${advances.map((a) => a.idx)}::int[], ${advances.map((a) => a.referralId)}::uuid[], ${advances.map((a) => a.version)}::int[],
        ${advances.map((a) => a.to)}::text[], ${advances.map((a) => a.reverseCredit)}::boolean[], ${advances.map((a) => a.serverId)}::uuid[],
        ${advances.map((a) => a.referrer)}::text[], ${advances.map((a) => a.eventId)}::bigint[],
        ${advances.map((a) => a.reversal.reason.reason)}::text[], ${advances.map((a) => a.reversal.reason.text)}::text[],
        ${advances.map((a) => a.reversal.effect === "clawback")}::boolean[]
      ) AS t(idx, id, version, "to", reverse_credit, server_id, referrer, event_id, reason, reason_text, clawback)
    ), advanced AS (
      -- Conditional write: the state decided on must still be the stored one.
      UPDATE referrals r SET state = p."to"::"ReferralState", version = r.version + 1,
             qualified_at = CASE WHEN p."to" = 'qualified' THEN ${now}::timestamptz ELSE r.qualified_at END,
             reversed_at = CASE WHEN p."to" = 'reversed' THEN ${now}::timestamptz ELSE r.reversed_at END,
             reversal_reason = CASE WHEN p."to" = 'reversed' THEN p.reason ELSE r.reversal_reason END,
             reversal_reason_text = CASE WHEN p."to" = 'reversed' THEN p.reason_text ELSE r.reversal_reason_text END,
             clawback_at = CASE WHEN p.clawback THEN ${now}::timestamptz ELSE r.clawback_at END,
             signals = coalesce(abuse.signals, r.signals), signal_details = coalesce(abuse.details, r.signal_details),
             -- An owner's review (made concurrently) is never overwritten: only an unflagged referral becomes flagged here.
             review = CASE WHEN r.review = 'none' THEN coalesce(abuse.review, r.review) ELSE r.review END
      FROM p LEFT JOIN abuse USING (idx) WHERE r.id = p.id AND r.version = p.version
      RETURNING p.idx
    )${backFlagsSql(
      backFlags,
      advances.map((a) => a.referralId),
    )}, adv_ok AS (
      SELECT p.* FROM p JOIN advanced a ON a.idx = p.idx
    ), credited AS (
      INSERT INTO referral_credits (referral_id, server_id, referrer_identity, period, credited_at)
      SELECT id, server_id, referrer, ${period}::text, ${now}::timestamptz FROM adv_ok WHERE "to" = 'qualified'
      RETURNING referral_id
    ), uncredited AS (
      -- A reversal keeps the credit as a record and takes it off the leaderboard and analytics.
      UPDATE referral_credits c SET reversed_at = ${now}::timestamptz FROM adv_ok
      WHERE adv_ok.reverse_credit AND c.referral_id = adv_ok.id AND c.reversed_at IS NULL
      RETURNING c.referral_id
    ), clawed AS (
      -- R3: a reversal after the lock period keeps the credit counted and records the clawback on it.
      UPDATE referral_credits c SET clawback_at = ${now}::timestamptz FROM adv_ok
      WHERE adv_ok.clawback AND c.referral_id = adv_ok.id AND c.reversed_at IS NULL AND c.clawback_at IS NULL
      RETURNING c.referral_id
    ), j AS (
      SELECT * FROM unnest(
        ${joins.map((j) => j.idx)}::int[], ${joins.map((j) => j.clickId)}::uuid[], ${joins.map((j) => j.anchorId)}::uuid[],
        ${joins.map((j) => j.eventId)}::bigint[]
      ) AS t(idx, click_id, anchor_id, event_id)
    ), join_linked AS (
      UPDATE referral_clicks c SET referral_id = j.anchor_id FROM j
      WHERE c.id = j.click_id AND c.referral_id IS NULL
      RETURNING j.idx, j.anchor_id, j.event_id
    ), queued AS (${insertOutboxRows(outbox, Prisma.sql`SELECT idx FROM mint_ok UNION ALL SELECT idx FROM adv_ok`)}
    ), rec AS (
      SELECT * FROM unnest(
        ${records.map((r) => r.eventId)}::bigint[], ${records.map((r) => r.outcome)}::text[], ${records.map((r) => r.referralId)}::uuid[]
      ) AS t(event_id, outcome, referral_id)
    ), recorded AS (
      UPDATE referral_events e SET outcome = x.outcome, referral_id = x.referral_id
      FROM (
        SELECT event_id, outcome, referral_id FROM rec
        UNION ALL SELECT event_id, 'advanced', id FROM mint_ok
        UNION ALL SELECT event_id, 'advanced', id FROM adv_ok
        UNION ALL SELECT event_id, 'idempotent', anchor_id FROM join_linked
      ) x
      WHERE e.id = x.event_id
      RETURNING e.id
    ), dropped AS (
      -- Events answered with an error leave no dedup row (as a rolled-back transaction would).
      DELETE FROM referral_events WHERE id = ANY(${dropped}::bigint[])
      RETURNING id
    )
    SELECT (SELECT coalesce(array_agg(idx), '{}') FROM mint_ok) AS minted,
           (SELECT coalesce(array_agg(idx), '{}') FROM mint_linked) AS mint_linked,
           (SELECT coalesce(array_agg(idx), '{}') FROM advanced) AS advanced,
           (SELECT coalesce(array_agg(idx), '{}') FROM join_linked) AS join_linked`);
  return {
    minted: new Set(row?.minted ?? []),
    mintLinked: new Set(row?.mint_linked ?? []),
    advanced: new Set(row?.advanced ?? []),
    joinLinked: new Set(row?.join_linked ?? []),
  };
}

/**
 * Fan-out back-flagging (abuse-facts.ts backFlagsOf), a data-modifying CTE of the write statement (with its leading
 * comma), or nothing when no event of the round passed a fan-out limit (no statement part, nothing read): the earlier
 * referees from the address get the signal too, and the review a newly flagged referral gets unless they are flagged
 * already. Bounded: at most the rules' maximum referees per signal and event, each by primary key. A referral this round
 * advances (`advancing`) is left to its own write: one statement must not update a row twice.
 */
function backFlagsSql(backFlags: readonly BackFlag[], advancing: readonly string[]): Prisma.Sql {
  const flags = backFlags.filter((f) => !advancing.includes(f.referralId));
  if (flags.length === 0) return Prisma.empty;
  return Prisma.sql`, back_flagged AS (
      UPDATE referrals r SET
             signals = ARRAY(SELECT c FROM unnest(${[...ABUSE_SIGNAL_CODES]}::text[]) WITH ORDINALITY AS t(c, n)
                             WHERE c = ANY(r.signals) OR c = ANY(b.codes) ORDER BY n),
             signal_details = r.signal_details || b.details,
             review = CASE WHEN r.review = 'none' THEN b.review::"ReferralReview" ELSE r.review END
      FROM (
        SELECT id, array_agg(code) AS codes, jsonb_object_agg(code, details::jsonb) AS details, min(review) AS review
        FROM unnest(${flags.map((f) => f.referralId)}::uuid[], ${flags.map((f) => f.code)}::text[], ${flags.map((f) => f.details)}::text[],
                    ${flags.map((f) => f.review)}::text[]) AS t(id, code, details, review)
        GROUP BY id
      ) b
      WHERE r.id = b.id
      RETURNING r.id
    )`;
}

/** An advanced transition, as its outbox event describes it. */
interface Transition {
  referralId: string;
  serverId: string;
  referrerIdentity: string;
  refereeIdentity: string;
  from: ReferralStateName;
  to: AnchorState;
  serverEventId: string;
  now: Date;
  /** Set for a reversal: its reason and whether it is a clawback. */
  reversal?: ReversalWrite;
}

/** The outbox event of an applied transition (`referral.<state>` on the referrals topic). */
function transitionEvent(t: Transition): OutboxEvent {
  return {
    topic: REFERRALS_TOPIC,
    type: `referral.${t.to}`,
    serverId: t.serverId,
    occurredAt: t.now,
    payload: {
      case: "referralTransitioned",
      value: create(ReferralTransitionedSchema, {
        referralId: t.referralId,
        serverId: t.serverId,
        referrerIdentity: t.referrerIdentity,
        refereeIdentity: t.refereeIdentity,
        state: t.to,
        previousState: t.from,
        serverEventId: t.serverEventId,
        reason: t.reversal?.reason.reason ?? "",
        reasonText: t.reversal?.reason.text ?? "",
        clawback: t.reversal?.effect === "clawback",
      }),
    },
  };
}

/**
 * A voter's erasure (services/voter-data/erase-voter-data.ts): the referrals `ids` (by primary key) where the voter
 * is the referee or the referrer get the tombstone in that column: `referee[i]` for the i-th id (null: not the
 * referee), `tombstone` as referrer when `asReferrer[i]`. The referral's state, times and credit are kept, so the
 * referrer's counts stay. Their credits' referrer identity follows. Returns the referrals changed.
 */
export function eraseReferralsSql(q: {
  serverId: string;
  ids: readonly string[];
  referee: readonly (string | null)[];
  asReferrer: readonly boolean[];
  tombstone: string;
}): Prisma.Sql {
  return Prisma.sql`
    WITH x AS (
      SELECT * FROM unnest(${[...q.ids]}::uuid[], ${[...q.referee]}::text[], ${[...q.asReferrer]}::boolean[]) AS x(id, referee, as_referrer)
    ), r AS (
      UPDATE referrals r SET referee_identity = coalesce(x.referee, r.referee_identity),
          referrer_identity = CASE WHEN x.as_referrer THEN ${q.tombstone} ELSE r.referrer_identity END
      FROM x WHERE r.server_id = ${q.serverId}::uuid AND r.id = x.id
      RETURNING r.id
    ), c AS (
      UPDATE referral_credits c SET referrer_identity = ${q.tombstone}
      FROM x WHERE c.referral_id = x.id AND x.as_referrer
      RETURNING c.referral_id
    )
    SELECT (SELECT count(*) FROM r)::int AS referrals, (SELECT count(*) FROM c)::int AS credits`;
}

/**
 * A voter's erasure: the clicks `ids` (by primary key) lose their address, subnet, user agent and pseudonyms (the voter clicked
 * them, or referred them); `asReferrer[i]` also puts the tombstone in the click's referrer identity. Returns the rows
 * changed.
 */
export function eraseReferralClicksSql(q: { serverId: string; ids: readonly string[]; asReferrer: readonly boolean[]; tombstone: string }): Prisma.Sql {
  return Prisma.sql`
    UPDATE referral_clicks k SET ip = NULL, subnet = NULL, user_agent = NULL, ip_key = NULL, subnet_key = NULL,
        referrer_identity = CASE WHEN x.as_referrer THEN ${q.tombstone} ELSE k.referrer_identity END
    FROM unnest(${[...q.ids]}::uuid[], ${[...q.asReferrer]}::boolean[]) AS x(id, as_referrer)
    WHERE k.server_id = ${q.serverId}::uuid AND k.id = x.id`;
}

/**
 * The dedup rows (referral_events) of the tokens `tokens` (a query of one text column) selects, deleted: a fragment of
 * the retention statements that remove those tokens' clicks (unlinkedClickRetention, endedReferralRetention). Without
 * its click a token is unknown (404) before any dedup row is read, so the rows would only take space. Reads the
 * (token, type, server_event_id) unique index once per token.
 */
export function deleteTokenEventsSql(tokens: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`DELETE FROM referral_events e WHERE e.token = ANY(ARRAY(${tokens}))`;
}

/** A referral's last change, the age column of its retention (the latest of its four times; greatest skips nulls). */
const LAST_CHANGE = Prisma.raw("greatest(registered_at, qualified_at, reversed_at, reviewed_at)");

/**
 * The referral retention (issue 30), as a retention rule: each batch removes at most `limit` referrals whose last
 * change (registration, qualification, reversal or the owner's review) is more than `keepSeconds` before `now`, oldest
 * first, with their clicks, their tokens' dedup rows (referral_events) and their credit, in ONE statement. Any state
 * goes: `reversed` is final; `qualified` is past every server's lock (`keepSeconds`, RETENTION_REFERRAL_DAYS, is longer
 * than the longest lock), so a reversal could only have been a clawback record; a `registered` referral that never
 * qualified in that time is given up. A referral held for the owner's review stays, whatever its age, until it is
 * reviewed (its review time is then its last change).
 *
 * Pay-once: with the clicks gone, every event through the referral's tokens, an exact replay included, is answered
 * 404 `unknown token` and writes nothing: no second `referral.qualified`, no second credit. The (server, referee)
 * first-touch anchor goes too: the referee registering again through another referrer's new click, past the horizon,
 * starts a new referral. The owner's all-time leaderboard and funnel count what is kept (docs/privacy.md).
 * Referrals locked by a concurrent ApplyEvent are skipped; one that event advances is no longer due (its last change
 * is re-read under the lock).
 */
export function endedReferralRetention(keepSeconds: number): RetentionRule {
  return statementRule({
    name: "ended_referrals",
    table: "referrals",
    keepSeconds,
    // Bounded: reads at most `limit` entries of referrals_last_change_age_key_idx (referrals not held, oldest last
    // change first, up to the cutoff; a held one is never read whatever its age), then by key: their clicks
    // (referral_clicks_referral_id_idx), those clicks' tokens' dedup rows (the (token, type, server_event_id) unique
    // index), their credits and the referrals themselves (primary keys). A referral has a click per token that
    // registered or joined it.
    removeDue: (cutoff, limit) => Prisma.sql`
      WITH due AS (
        ${oldestDueRowsSql({ table: "referrals", columns: Prisma.raw("id"), due: Prisma.sql`review <> 'held'`, column: LAST_CHANGE, cut: cutoff, limit })}
      ), clicks AS (
        DELETE FROM referral_clicks c WHERE c.referral_id = ANY(ARRAY(SELECT id FROM due)) RETURNING c.token
      ), events AS (${deleteTokenEventsSql(Prisma.sql`SELECT token FROM clicks`)}
      ), credits AS (
        DELETE FROM referral_credits k WHERE k.referral_id = ANY(ARRAY(SELECT id FROM due))
      )
      DELETE FROM referrals r WHERE r.id = ANY(ARRAY(SELECT id FROM due))`,
    // One entry of referrals_last_change_age_key_idx.
    oldest: Prisma.sql`SELECT ${oldestOfAgeKey(LAST_CHANGE)} AS oldest FROM referrals WHERE review <> 'held'`,
  });
}
