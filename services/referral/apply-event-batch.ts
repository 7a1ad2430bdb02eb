import { randomUUID } from "node:crypto";
import type { Tx } from "../shared/db.js";
import type { CoreDeps } from "../shared/deps.js";
import { DomainError, IllegalTransition, Overloaded } from "../shared/errors.js";
import { ADMISSION_MAX_QUEUE_WAIT_MS, createGroupCommit, type GroupCommit, type ItemOutcome } from "../shared/group-commit.js";
import { toOutboxRow, type OutboxRow } from "../shared/outbox.js";
import { APPLY_EVENT_TRANSACTION_LIMITS_MS, applyEvent, transitionEvent, type ApplyEventResult } from "./apply-event.js";
import type { ApplyEventCommand } from "./domain/commands.js";
import { decideRegistration, type AnchorView } from "./domain/first-touch.js";
import { periodOf } from "../shared/period.js";
import { ERROR_TEXT } from "../shared/contract.js";
import { decide, isAnchorState, type AnchorState } from "./domain/transitions.js";

/** Most events applied in one transaction. */
export const APPLY_EVENT_MAX_BATCH = 64;
/** Most events waiting for a batch; beyond it ApplyEvent answers resource_exhausted with a retry hint. */
export const APPLY_EVENT_MAX_QUEUE = 2_048;
/** Batches in flight at once (each holds one pooled connection). */
export const APPLY_EVENT_MAX_IN_FLIGHT = 2;
/** A batch transaction's limits (their reasons beside APPLY_EVENT_TRANSACTION_LIMITS_MS). */
const TRANSACTION_LIMITS_MS = APPLY_EVENT_TRANSACTION_LIMITS_MS.batch;

/** Settings of the ApplyEvent group commit (the APPLY_EVENT_* defaults when omitted; tests shrink them). */
export interface ApplyEventBatchOptions {
  maxBatch?: number;
  maxQueue?: number;
  maxQueueWaitMs?: number;
  maxInFlight?: number;
}

/**
 * The referral service's ApplyEvent queue: concurrent events are applied together
 * (applyEventBatch), two events of one token or one (server, referee) never in one
 * batch, and beyond capacity callers get `Overloaded` (resource_exhausted, retryable).
 */
export function createApplyEventQueue(deps: CoreDeps, opts: ApplyEventBatchOptions = {}): GroupCommit<ApplyEventCommand, ApplyEventResult> {
  return createGroupCommit<ApplyEventCommand, ApplyEventResult>({
    runBatch: (commands) => applyEventBatch(deps, commands),
    keysOf: batchKeys,
    maxBatch: opts.maxBatch ?? APPLY_EVENT_MAX_BATCH,
    maxQueue: opts.maxQueue ?? APPLY_EVENT_MAX_QUEUE,
    maxQueueWaitMs: opts.maxQueueWaitMs ?? ADMISSION_MAX_QUEUE_WAIT_MS,
    maxInFlight: opts.maxInFlight ?? APPLY_EVENT_MAX_IN_FLIGHT,
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
 * Applies many events (no two sharing a token or a registered referee) in ONE
 * transaction of two statements (plus a third only after a lost race):
 *
 *  1. read + dedup: every token's click, the dedup rows (`INSERT ... ON CONFLICT DO
 *     NOTHING`, only for tokens of the caller's server), and the anchors each event
 *     is decided on (the referee's and the one the click is linked to);
 *  2. in memory, each event is decided by the same rules as `applyEvent`
 *     (decideRegistration, the transition table);
 *  3. write: mints, click links, conditional state writes (on the version read),
 *     credits, outbox rows and outcomes, each part depending on the write it follows
 *     (nothing is written for an event whose mint or state write lost), and the
 *     dedup rows of events answered with an error are deleted (as a rollback would).
 *
 * Per-event isolation: a 404/422 is that event's outcome only. An event whose
 * conditional write lost to a concurrent transaction (or that would advance a
 * referral another event of the batch advances) leaves nothing behind and is run
 * again alone through `applyEvent` after the commit. If the transaction fails as a
 * whole, every event is run alone through `applyEvent`.
 */
export async function applyEventBatch(deps: CoreDeps, commands: readonly ApplyEventCommand[]): Promise<ItemOutcome<ApplyEventResult>[]> {
  let applied: BatchResult;
  try {
    applied = await deps.prisma.$transaction((tx) => applyBatchOnce(tx, commands, deps.now()), TRANSACTION_LIMITS_MS);
  } catch (error) {
    // Failure policy: no connection within its maxWait (or the transaction expired) means the database is
    // saturated and nothing of this batch committed: every event is refused as overloaded (retryable, nothing
    // written) instead of queueing more work behind it or answering `internal error`.
    if (isTransactionApiError(error)) {
      deps.log.warn({ events: commands.length }, "referral event batch refused: no database transaction in time");
      return commands.map(() => ({ ok: false, error: new Overloaded(TRANSACTION_LIMITS_MS.maxWait) }));
    }
    // Failure policy: the whole batch rolled back (a lost click link after a mint, a deadlock with another
    // instance, a lost connection): each event is applied alone through the one-event path, which has its own
    // retries and error mapping, so one event's trouble still reaches only that event's caller.
    deps.log.debug({ err: error, events: commands.length }, "referral event batch failed; applying its events one by one");
    return settleEach(commands, (command) => applyEvent(deps, command));
  }
  const outcomes = applied.outcomes;
  const again = await settleEach(
    applied.retry.map((i) => commands[i]!),
    (command) => applyEvent(deps, command),
  );
  applied.retry.forEach((i, n) => (outcomes[i] = again[n]!));
  return outcomes as ItemOutcome<ApplyEventResult>[];
}

/** Prisma's P2028 (a transaction could not start within maxWait, or expired before its commit): nothing committed. */
function isTransactionApiError(error: unknown): boolean {
  return (error as { code?: unknown })?.code === "P2028";
}

async function settleEach<I, O>(items: readonly I[], run: (item: I) => Promise<O>): Promise<ItemOutcome<O>[]> {
  const settled = await Promise.allSettled(items.map(run));
  return settled.map((s) => (s.status === "fulfilled" ? { ok: true, value: s.value } : { ok: false, error: s.reason }));
}

/** Thrown inside the batch transaction to roll it all back (a click linked concurrently after this batch minted its anchor). */
class BatchLostRace extends Error {
  constructor(what: string) {
    super(`batch lost a concurrent write: ${what}`);
    this.name = "BatchLostRace";
  }
}

interface BatchResult {
  /** Per event; undefined where the event is retried alone. */
  outcomes: (ItemOutcome<ApplyEventResult> | undefined)[];
  /** Indexes of events to run again alone after the commit. */
  retry: number[];
}

interface ReadRow {
  idx: number;
  click_id: string | null;
  click_server_id: string | null;
  click_referrer: string | null;
  event_id: bigint | null;
  linked_id: string | null;
  linked_referrer: string | null;
  linked_referee: string | null;
  linked_state: string | null;
  linked_version: number | null;
  referee_id: string | null;
  referee_referrer: string | null;
  referee_state: string | null;
}

/** What statement 3 does for one event. */
type Plan =
  /** Nothing to write: a 404 (no dedup row was inserted) or a duplicate. */
  | { kind: "answer"; outcome: ItemOutcome<ApplyEventResult> }
  /** A 422/400 after the dedup row was inserted: the row is deleted. */
  | { kind: "error"; eventId: bigint; error: unknown }
  /** No state change: record the outcome (idempotent, first_touch_conflict). */
  | { kind: "record"; eventId: bigint; outcome: "idempotent" | "first_touch_conflict"; referralId: string | null; result: ApplyEventResult }
  /** Idempotent `registered` through another token of the same referrer: link the click, then record. */
  | { kind: "join"; eventId: bigint; clickId: string; anchorId: string; result: ApplyEventResult }
  | { kind: "mint"; eventId: bigint; id: string; serverId: string; referee: string; referrer: string; clickId: string; outbox: OutboxRow }
  | {
      kind: "advance";
      eventId: bigint;
      referralId: string;
      version: number;
      to: AnchorState;
      reverseCredit: boolean;
      serverId: string;
      referrer: string;
      outbox: OutboxRow;
      result: ApplyEventResult;
    }
  /** Applied alone after the commit (its dedup row is deleted here). */
  | { kind: "retry"; eventId: bigint };

async function applyBatchOnce(tx: Tx, commands: readonly ApplyEventCommand[], now: Date): Promise<BatchResult> {
  const rows = await readAndDedup(tx, commands, now);
  const byIdx = new Map(rows.map((r) => [r.idx, r]));
  const advancing = new Set<string>();
  const plans = commands.map((command, idx): Plan => {
    const row = byIdx.get(idx);
    try {
      return planEvent(command, row, now, advancing);
    } catch (error) {
      // Failure policy: a domain rejection (422, 400) is this event's answer; its dedup row is deleted below.
      if (row?.event_id == null) return { kind: "answer", outcome: { ok: false, error } };
      return { kind: "error", eventId: row.event_id, error };
    }
  });

  const written = await writePlans(tx, plans, now);
  const outcomes: (ItemOutcome<ApplyEventResult> | undefined)[] = [];
  const retry: number[] = [];
  const lost: bigint[] = [];
  plans.forEach((plan, idx) => {
    const loseOrRetry = (eventId: bigint) => {
      retry.push(idx);
      lost.push(eventId);
      outcomes.push(undefined);
    };
    switch (plan.kind) {
      case "answer":
        outcomes.push(plan.outcome);
        return;
      case "error":
        outcomes.push({ ok: false, error: plan.error });
        return;
      case "record":
        outcomes.push({ ok: true, value: plan.result });
        return;
      case "retry":
        // Its dedup row was deleted by the write statement already.
        retry.push(idx);
        outcomes.push(undefined);
        return;
      case "join":
        if (written.joinLinked.has(idx)) outcomes.push({ ok: true, value: plan.result });
        else loseOrRetry(plan.eventId);
        return;
      case "advance":
        if (written.advanced.has(idx)) outcomes.push({ ok: true, value: plan.result });
        else loseOrRetry(plan.eventId);
        return;
      case "mint":
        if (!written.minted.has(idx)) {
          loseOrRetry(plan.eventId); // another transaction anchored the referee first: decided afresh alone
          return;
        }
        if (!written.mintLinked.has(idx)) throw new BatchLostRace(`click ${plan.clickId} was linked concurrently`);
        outcomes.push({ ok: true, value: { kind: "applied", referralId: plan.id, state: "registered", advanced: true } });
        return;
    }
  });
  if (lost.length > 0) {
    // The events that lost a race wrote nothing but their dedup rows; those go, so the retry inserts them afresh.
    await tx.$executeRaw`DELETE FROM referral_events WHERE id = ANY(${lost.map(String)}::bigint[])`;
  }
  return { outcomes, retry };
}

/** Statement 1: clicks, dedup rows (only for tokens of the caller's server) and the anchors, per event. */
function readAndDedup(tx: Tx, commands: readonly ApplyEventCommand[], now: Date): Promise<ReadRow[]> {
  return tx.$queryRaw<ReadRow[]>`
    WITH input AS (
      SELECT * FROM unnest(
        ${commands.map((c) => c.token)}::text[], ${commands.map((c) => c.event)}::text[], ${commands.map((c) => c.serverEventId)}::text[],
        ${commands.map((c) => c.serverId)}::uuid[], ${commands.map((c) => c.kid)}::text[],
        ${commands.map((c) => (c.callerTs === null ? null : c.callerTs.toString()))}::bigint[], ${commands.map((c) => c.refereeIdentity)}::text[]
      ) WITH ORDINALITY AS i(token, type, server_event_id, server_id, kid, caller_ts, referee, ord)
    ), click AS (
      SELECT i.ord, c.id, c.server_id, c.referrer_identity, c.referral_id
      FROM input i JOIN referral_clicks c ON c.token = i.token
    ), inserted AS (
      INSERT INTO referral_events (token, type, server_event_id, server_id, outcome, kid, caller_ts, received_at)
      SELECT i.token, i.type, i.server_event_id, c.server_id, 'pending', i.kid, i.caller_ts, ${now}::timestamptz
      FROM input i JOIN click c ON c.ord = i.ord
      WHERE c.server_id = i.server_id
      ORDER BY i.ord
      ON CONFLICT (token, type, server_event_id) DO NOTHING
      RETURNING id, token
    )
    SELECT (i.ord - 1)::int AS idx, c.id::text AS click_id, c.server_id::text AS click_server_id, c.referrer_identity AS click_referrer,
           e.id AS event_id,
           l.id::text AS linked_id, l.referrer_identity AS linked_referrer, l.referee_identity AS linked_referee,
           l.state::text AS linked_state, l.version AS linked_version,
           r.id::text AS referee_id, r.referrer_identity AS referee_referrer, r.state::text AS referee_state
    FROM input i
    LEFT JOIN click c ON c.ord = i.ord
    LEFT JOIN inserted e ON e.token = i.token
    LEFT JOIN referrals l ON l.id = c.referral_id
    LEFT JOIN referrals r ON i.referee IS NOT NULL AND r.server_id = c.server_id AND r.referee_identity = i.referee`;
}

/** Decides one event from its row (throws the event's DomainError), as applyEvent would inside its transaction. */
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
        const id = randomUUID();
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

  // qualified / reversed: the anchor is resolved from (token, server_id).
  if (!linked) throw new IllegalTransition("clicked", command.event);
  const decision = decide(linked.state, command.event);
  if (decision.kind === "idempotent") {
    const result: ApplyEventResult = { kind: "applied", referralId: linked.id, state: decision.state, advanced: false };
    return { kind: "record", eventId, outcome: "idempotent", referralId: linked.id, result };
  }
  // One advance per referral per batch: a second one is decided afresh, alone, after this batch commits.
  if (advancing.has(linked.id)) return { kind: "retry", eventId };
  advancing.add(linked.id);
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
    }),
  );
  return {
    kind: "advance",
    eventId,
    referralId: linked.id,
    version: row.linked_version!,
    to: decision.to,
    reverseCredit: decision.to === "reversed" && linked.state === "qualified",
    serverId: row.click_server_id,
    referrer: linked.referrerIdentity,
    outbox,
    result: { kind: "applied", referralId: linked.id, state: decision.to, advanced: true },
  };
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
 * Statement 3: every write of the batch in one statement. Each part reads the RETURNING of
 * the write it depends on, so an event whose mint or conditional write lost writes nothing
 * else (its dedup row stays 'pending' and is deleted by the caller before the retry).
 */
async function writePlans(tx: Tx, plans: readonly Plan[], now: Date): Promise<Written> {
  const mints: Array<Extract<Plan, { kind: "mint" }> & { idx: number }> = [];
  const advances: Array<Extract<Plan, { kind: "advance" }> & { idx: number }> = [];
  const joins: Array<Extract<Plan, { kind: "join" }> & { idx: number }> = [];
  const records: Array<Extract<Plan, { kind: "record" }>> = [];
  const dropped: bigint[] = [];
  plans.forEach((plan, idx) => {
    if (plan.kind === "mint") mints.push({ ...plan, idx });
    else if (plan.kind === "advance") advances.push({ ...plan, idx });
    else if (plan.kind === "join") joins.push({ ...plan, idx });
    else if (plan.kind === "record") records.push(plan);
    else if (plan.kind === "error" || plan.kind === "retry") dropped.push(plan.eventId);
  });
  if (mints.length + advances.length + joins.length + records.length + dropped.length === 0) {
    return { minted: new Set(), mintLinked: new Set(), advanced: new Set(), joinLinked: new Set() };
  }
  const period = periodOf(now);
  const hex = (b: Buffer) => b.toString("hex");
  const [row] = await tx.$queryRaw<Array<{ minted: number[]; mint_linked: number[]; advanced: number[]; join_linked: number[] }>>`
    WITH m AS (
      SELECT * FROM unnest(
        ${mints.map((m) => m.idx)}::int[], ${mints.map((m) => m.id)}::uuid[], ${mints.map((m) => m.serverId)}::uuid[],
        ${mints.map((m) => m.referee)}::text[], ${mints.map((m) => m.referrer)}::text[], ${mints.map((m) => m.clickId)}::uuid[],
        ${mints.map((m) => m.eventId.toString())}::bigint[],
        ${mints.map((m) => m.outbox.topic)}::text[], ${mints.map((m) => m.outbox.key)}::text[], ${mints.map((m) => m.outbox.type)}::text[],
        ${mints.map((m) => hex(m.outbox.payload))}::text[], ${mints.map((m) => m.outbox.shard)}::int[]
      ) AS t(idx, id, server_id, referee, referrer, click_id, event_id, topic, key, type, payload, shard)
    ), minted AS (
      INSERT INTO referrals (id, server_id, referee_identity, referrer_identity, state, version, registered_at)
      SELECT id, server_id, referee, referrer, 'registered'::"ReferralState", 1, ${now}::timestamptz FROM m ORDER BY idx
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
        ${advances.map((a) => a.referrer)}::text[], ${advances.map((a) => a.eventId.toString())}::bigint[],
        ${advances.map((a) => a.outbox.topic)}::text[], ${advances.map((a) => a.outbox.key)}::text[], ${advances.map((a) => a.outbox.type)}::text[],
        ${advances.map((a) => hex(a.outbox.payload))}::text[], ${advances.map((a) => a.outbox.shard)}::int[]
      ) AS t(idx, id, version, "to", reverse_credit, server_id, referrer, event_id, topic, key, type, payload, shard)
    ), advanced AS (
      -- Conditional write: the state decided on must still be the stored one.
      UPDATE referrals r SET state = p."to"::"ReferralState", version = r.version + 1,
             qualified_at = CASE WHEN p."to" = 'qualified' THEN ${now}::timestamptz ELSE r.qualified_at END,
             reversed_at = CASE WHEN p."to" = 'reversed' THEN ${now}::timestamptz ELSE r.reversed_at END
      FROM p WHERE r.id = p.id AND r.version = p.version
      RETURNING p.idx
    ), adv_ok AS (
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
    ), j AS (
      SELECT * FROM unnest(
        ${joins.map((j) => j.idx)}::int[], ${joins.map((j) => j.clickId)}::uuid[], ${joins.map((j) => j.anchorId)}::uuid[],
        ${joins.map((j) => j.eventId.toString())}::bigint[]
      ) AS t(idx, click_id, anchor_id, event_id)
    ), join_linked AS (
      UPDATE referral_clicks c SET referral_id = j.anchor_id FROM j
      WHERE c.id = j.click_id AND c.referral_id IS NULL
      RETURNING j.idx, j.anchor_id, j.event_id
    ), queued AS (
      INSERT INTO outbox (topic, key, type, payload, shard, created_at)
      SELECT topic, key, type, decode(payload, 'hex'), shard, ${now}::timestamptz FROM (
        SELECT idx, topic, key, type, payload, shard FROM mint_ok
        UNION ALL
        SELECT idx, topic, key, type, payload, shard FROM adv_ok
      ) o ORDER BY idx
      RETURNING id
    ), rec AS (
      SELECT * FROM unnest(
        ${records.map((r) => r.eventId.toString())}::bigint[], ${records.map((r) => r.outcome)}::text[], ${records.map((r) => r.referralId)}::uuid[]
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
      -- Events answered with an error leave no dedup row (as the rollback of applyEvent's transaction would).
      DELETE FROM referral_events WHERE id = ANY(${dropped.map(String)}::bigint[])
      RETURNING id
    )
    SELECT (SELECT coalesce(array_agg(idx), '{}') FROM mint_ok) AS minted,
           (SELECT coalesce(array_agg(idx), '{}') FROM mint_linked) AS mint_linked,
           (SELECT coalesce(array_agg(idx), '{}') FROM advanced) AS advanced,
           (SELECT coalesce(array_agg(idx), '{}') FROM join_linked) AS join_linked`;
  return {
    minted: new Set(row?.minted ?? []),
    mintLinked: new Set(row?.mint_linked ?? []),
    advanced: new Set(row?.advanced ?? []),
    joinLinked: new Set(row?.join_linked ?? []),
  };
}
