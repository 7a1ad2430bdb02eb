import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { ReferralTransitionedSchema } from "../../gen/proto/events/v1/events_pb.js";
import { REFERRALS_TOPIC } from "../shared/bus.js";
import type { Tx } from "../shared/db.js";
import type { CoreDeps } from "../shared/deps.js";
import { DomainError, IllegalTransition } from "../shared/errors.js";
import { toOutboxRow, writeOutbox, type OutboxEvent } from "../shared/outbox.js";
import type { ApplyEventCommand } from "./domain/commands.js";
import { decideRegistration, type AnchorView } from "./domain/first-touch.js";
import { periodOf } from "../shared/period.js";
import { decide, isAnchorState, type AnchorState, type ReferralEventName, type ReferralStateName } from "./domain/transitions.js";
import { ERROR_TEXT } from "../shared/contract.js";

/** Retries of the whole transaction after a lost conditional write (version or click link). */
export const MAX_TRANSACTION_RETRIES = 3;
/**
 * Prisma's interactive-transaction limits for ApplyEvent, both paths (milliseconds, Prisma's option names):
 * - `maxWait`, how long a transaction may wait for a pooled connection. A batch waits 5 s: no connection
 *   by then means the database is saturated, and the batch's events are refused as overloaded (retryable,
 *   this wait as the retry hint) inside the gateway's 10 s RPC deadline (gateway/server.ts RPC_TIMEOUT_MS),
 *   instead of queueing more work. The one-event path (an event rerun after its batch failed or lost a
 *   race, and its own lost-race retries) waits up to 10 s: it runs only for events a batch could not
 *   settle, few at a time, and its caller would otherwise get `internal error`.
 * - `timeout`, how long one transaction may run before Prisma rolls it back (15 s on both paths): a bound
 *   for a stuck transaction (a lock wait), so its connection returns to the pool; nothing it wrote stays.
 */
export const APPLY_EVENT_TRANSACTION_LIMITS_MS = {
  single: { maxWait: 10_000, timeout: 15_000 },
  batch: { maxWait: 5_000, timeout: 15_000 },
} as const;

/** The result of ApplyEvent, as the contract's 200 bodies distinguish them. */
export type ApplyEventResult =
  | { kind: "applied"; referralId: string; state: AnchorState; advanced: boolean }
  | { kind: "duplicate" }
  | { kind: "first_touch_conflict" };

/** The `outcome` recorded on the event row. */
type RecordedOutcome = "advanced" | "idempotent" | "first_touch_conflict";

/**
 * Thrown inside the transaction when a conditional write matched no row because
 * a concurrent transaction changed the row first; the whole transaction is rolled
 * back and run again (never carried on after a lost race).
 */
class LostRace extends Error {
  constructor(what: string) {
    super(`lost a concurrent write: ${what}`);
    this.name = "LostRace";
  }
}

/**
 * Applies one verified lifecycle event. In ONE interactive transaction: token
 * lookup, the dedup row `INSERT ... ON CONFLICT DO NOTHING RETURNING`, the
 * first-touch / state-machine decision, the conditional state write, the credit
 * row, the outbox row and the event row's outcome. Any thrown error (404, 422,
 * 500) rolls everything back, including the dedup row, so a retry with the same
 * server_event_id is processed afresh.
 */
export async function applyEvent(deps: CoreDeps, command: ApplyEventCommand): Promise<ApplyEventResult> {
  for (let retry = 0; ; retry++) {
    try {
      return await deps.prisma.$transaction((tx) => applyOnce(tx, command, deps.now()), APPLY_EVENT_TRANSACTION_LIMITS_MS.single);
    } catch (error) {
      // Failure policy: a lost conditional write means the state moved under us - rerun the whole
      // transaction on fresh reads, at most MAX_TRANSACTION_RETRIES times, then fail as an internal error.
      if (error instanceof LostRace && retry < MAX_TRANSACTION_RETRIES) {
        deps.log.debug({ retry: retry + 1, reason: error.message }, "retrying referral event transaction");
        continue;
      }
      throw error;
    }
  }
}

interface ClickRow {
  id: string;
  server_id: string;
  referrer_identity: string;
}

interface AnchorRow {
  id: string;
  referee_identity: string;
  referrer_identity: string;
  state: string;
  version: number;
  linked: boolean;
}

async function applyOnce(tx: Tx, command: ApplyEventCommand, now: Date): Promise<ApplyEventResult> {
  // Ruling 10: the token is checked before dedup, so another server's token is a 404 even on replay.
  // One statement: the dedup row is inserted only when the token belongs to this server. It is written
  // before any processing; a concurrent identical insert waits on the unique index and then does
  // nothing, so exactly one request is processed.
  const [click] = await tx.$queryRaw<Array<ClickRow & { event_id: bigint | null }>>`
    WITH click AS (
      SELECT id, server_id, referrer_identity FROM referral_clicks WHERE token = ${command.token}
    ), inserted AS (
      INSERT INTO referral_events (token, type, server_event_id, server_id, outcome, kid, caller_ts, received_at)
      SELECT ${command.token}::text, ${command.event}::text, ${command.serverEventId}::text, click.server_id, 'pending',
             ${command.kid}::text, ${command.callerTs}::bigint, ${now}::timestamptz
      FROM click WHERE click.server_id = ${command.serverId}::uuid
      ON CONFLICT (token, type, server_event_id) DO NOTHING
      RETURNING id
    )
    SELECT click.id::text, click.server_id::text, click.referrer_identity, (SELECT id FROM inserted) AS event_id FROM click`;
  if (!click || click.server_id !== command.serverId) {
    throw new DomainError("unknown_token", ERROR_TEXT.unknownToken);
  }
  if (click.event_id === null) return { kind: "duplicate" };
  const eventId = click.event_id;

  const step =
    command.event === "registered" ? await applyRegistered(tx, command, click, now, eventId) : await applyProgress(tx, command, command.event, click, now);

  if (!step.recorded) {
    await tx.referralEvent.update({
      where: { id: eventId },
      data: { outcome: step.outcome, referralId: step.result.kind === "applied" ? step.result.referralId : null },
    });
  }
  return step.result;
}

interface Step {
  outcome: RecordedOutcome;
  result: ApplyEventResult;
  /** True when the step already wrote the event row's outcome in its own statement. */
  recorded?: boolean;
}

/** Reads the referee's anchor and the anchor the click is linked to, in one query. */
async function readRegistrationAnchors(tx: Tx, clickId: string, serverId: string, refereeIdentity: string) {
  const rows = await tx.$queryRaw<AnchorRow[]>`
    SELECT r.id::text, r.referee_identity, r.referrer_identity, r.state::text AS state, r.version,
           (r.id = c.referral_id) AS linked
    FROM referral_clicks c
    JOIN referrals r
      ON (r.server_id = ${serverId}::uuid AND r.referee_identity = ${refereeIdentity}) OR r.id = c.referral_id
    WHERE c.id = ${clickId}::uuid`;
  const refereeRow = rows.find((r) => r.referee_identity === refereeIdentity) ?? null;
  const linkedRow = rows.find((r) => r.linked) ?? null;
  return { refereeAnchor: refereeRow && toAnchorView(refereeRow), linkedAnchor: linkedRow && toAnchorView(linkedRow) };
}

async function applyRegistered(tx: Tx, command: ApplyEventCommand, click: ClickRow, now: Date, eventId: bigint): Promise<Step> {
  const refereeIdentity = command.refereeIdentity;
  if (refereeIdentity === null) throw new DomainError("invalid_argument", ERROR_TEXT.refereeRequired);

  // At most two passes: the second runs only when a concurrent transaction minted the anchor first.
  for (let pass = 0; pass < 2; pass++) {
    const facts = await readRegistrationAnchors(tx, click.id, click.server_id, refereeIdentity);
    const decision = decideRegistration({ clickReferrer: click.referrer_identity, ...facts });

    if (decision.kind === "first_touch_conflict") {
      return { outcome: "first_touch_conflict", result: { kind: "first_touch_conflict" } };
    }
    if (decision.kind === "join") {
      if (decision.link) await linkClick(tx, click.id, decision.anchorId);
      return { outcome: "idempotent", result: { kind: "applied", referralId: decision.anchorId, state: decision.state, advanced: false } };
    }

    // First touch is decided by the unique (server_id, referee_identity) index, not by the read above.
    // One statement: mint, link the click, queue the outbox row and record the outcome; every part
    // after the mint reads `minted`, so nothing else is written when the mint lost the race.
    const id = randomUUID();
    const outbox = toOutboxRow(
      transitionEvent({
        referralId: id,
        serverId: click.server_id,
        referrerIdentity: click.referrer_identity,
        refereeIdentity,
        from: "clicked",
        to: "registered",
        serverEventId: command.serverEventId,
        now,
      }),
    );
    const [written] = await tx.$queryRaw<Array<{ minted: number; linked: number }>>`
      WITH minted AS (
        INSERT INTO referrals (id, server_id, referee_identity, referrer_identity, state, version, registered_at)
        VALUES (${id}::uuid, ${click.server_id}::uuid, ${refereeIdentity}, ${click.referrer_identity},
                'registered'::"ReferralState", 1, ${now}::timestamptz)
        ON CONFLICT (server_id, referee_identity) DO NOTHING
        RETURNING id
      ), linked AS (
        UPDATE referral_clicks c SET referral_id = minted.id FROM minted
        WHERE c.id = ${click.id}::uuid AND c.referral_id IS NULL
        RETURNING c.id
      ), queued AS (
        INSERT INTO outbox (topic, key, type, payload, shard, created_at)
        SELECT ${outbox.topic}::text, ${outbox.key}::text, ${outbox.type}::text, ${outbox.payload}::bytea, ${outbox.shard}::int,
               ${outbox.createdAt}::timestamptz
        FROM minted
        RETURNING id
      ), recorded AS (
        UPDATE referral_events e SET outcome = 'advanced', referral_id = minted.id FROM minted
        WHERE e.id = ${eventId}::bigint
        RETURNING e.id
      )
      SELECT (SELECT count(*) FROM minted)::int AS minted, (SELECT count(*) FROM linked)::int AS linked`;
    if (!written || written.minted === 0) continue; // Another transaction committed the anchor; READ COMMITTED sees it on re-read.
    if (written.linked !== 1) throw new LostRace(`click ${click.id} was linked concurrently`);
    return { outcome: "advanced", result: { kind: "applied", referralId: id, state: "registered", advanced: true }, recorded: true };
  }
  throw new LostRace("anchor vanished between the conflicting insert and its re-read");
}

async function applyProgress(tx: Tx, command: ApplyEventCommand, event: Exclude<ReferralEventName, "registered">, click: ClickRow, now: Date): Promise<Step> {
  // The anchor is resolved from (token, server_id); referee_identity is not needed.
  const [row] = await tx.$queryRaw<AnchorRow[]>`
    SELECT r.id::text, r.referee_identity, r.referrer_identity, r.state::text AS state, r.version, true AS linked
    FROM referral_clicks c JOIN referrals r ON r.id = c.referral_id
    WHERE c.id = ${click.id}::uuid`;
  if (!row) throw new IllegalTransition("clicked", event);
  const anchor = toAnchorView(row);
  const decision = decide(anchor.state, event);
  if (decision.kind === "idempotent") {
    return { outcome: "idempotent", result: { kind: "applied", referralId: anchor.id, state: decision.state, advanced: false } };
  }

  // Conditional write: the state we decided on must still be the stored one.
  const updated = await tx.referral.updateMany({
    where: { id: anchor.id, version: row.version },
    data: {
      state: decision.to,
      version: { increment: 1 },
      ...(decision.to === "qualified" ? { qualifiedAt: now } : { reversedAt: now }),
    },
  });
  if (updated.count !== 1) throw new LostRace(`referral ${anchor.id} version ${row.version}`);

  if (decision.to === "qualified") {
    await tx.referralCredit.create({
      data: {
        referralId: anchor.id,
        serverId: click.server_id,
        referrerIdentity: anchor.referrerIdentity,
        period: periodOf(now),
        creditedAt: now,
      },
    });
  } else if (anchor.state === "qualified") {
    // A reversal keeps the credit as a record and takes it off the leaderboard and analytics.
    await tx.referralCredit.updateMany({ where: { referralId: anchor.id, reversedAt: null }, data: { reversedAt: now } });
  }

  await writeTransition(tx, {
    referralId: anchor.id,
    serverId: click.server_id,
    referrerIdentity: anchor.referrerIdentity,
    refereeIdentity: row.referee_identity,
    from: anchor.state,
    to: decision.to,
    serverEventId: command.serverEventId,
    now,
  });
  return { outcome: "advanced", result: { kind: "applied", referralId: anchor.id, state: decision.to, advanced: true } };
}

/** Links the token's click to its anchor; a click is linked once (conditional on still being unlinked). */
async function linkClick(tx: Tx, clickId: string, referralId: string): Promise<void> {
  const linked = await tx.referralClick.updateMany({ where: { id: clickId, referralId: null }, data: { referralId } });
  if (linked.count !== 1) throw new LostRace(`click ${clickId} was linked concurrently`);
}

/** An advanced transition, as its outbox event describes it. */
export interface Transition {
  referralId: string;
  serverId: string;
  referrerIdentity: string;
  refereeIdentity: string;
  from: ReferralStateName;
  to: AnchorState;
  serverEventId: string;
  now: Date;
}

/** The outbox event of an applied transition (`referral.<state>` on the referrals topic). */
export function transitionEvent(t: Transition): OutboxEvent {
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
      }),
    },
  };
}

/** Writes the outbox row of an advanced transition, in the caller's transaction. */
async function writeTransition(tx: Tx, t: Transition): Promise<void> {
  await writeOutbox(tx, transitionEvent(t));
}

function toAnchorView(row: AnchorRow): AnchorView {
  if (!isAnchorState(row.state)) throw new Error(`referral ${row.id} has an unknown state`);
  return { id: row.id, referrerIdentity: row.referrer_identity, state: row.state };
}
