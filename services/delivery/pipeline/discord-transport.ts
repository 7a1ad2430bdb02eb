import { webhookPathOf } from "../../shared/values/discord-webhook-url.js";
import { Prisma } from "../../../gen/prisma/client.js";
import { runSql } from "../../shared/adapters/sql/executor.js";
import { DiscordErrorCode, type DiscordAnswer, type DiscordRest } from "../../shared/adapters/discord-rest.js";
import {
  cutToChars,
  defaultDiscordTemplate,
  DISCORD_CONTENT_MAX_CHARS,
  DISCORD_EMBED_DESCRIPTION_MAX_CHARS,
  renderDiscordTemplate,
  type DiscordValues,
} from "../../shared/values/discord-template.js";
import type { AttemptExchange } from "./attempt-exchange.js";
import { claimedColumnsSql, releaseLease, toClaimedDelivery, type ClaimedDelivery, type LeasedRow } from "./claim-deliveries.js";
import { LEASE_MARGIN_MS } from "./lease.js";
import { performAttempt, type AttemptDeps, type SentOutcome } from "./perform-attempt.js";
import type { AttemptOutcome, Transport } from "./transport.js";
import { leaseDeliveriesSql } from "./write-deliveries.js";

/**
 * The Discord destination as a transport (docs/discord.md): each event becomes its endpoint's template rendered into
 * one or more lines, and the events of one endpoint that are due together go as ONE webhook message (lines joined,
 * within Discord's 2,000 characters): the deliveries the dispatcher handed over while the endpoint's previous message
 * was being sent, plus the endpoint's other due Discord deliveries, leased here (leaseDueDiscordDeliveries). Every
 * delivery keeps its own row and attempt record (the ones leased here are recorded here, through performAttempt),
 * and each event is in exactly one message. Rate limits go through the Discord client: a message waits for its
 * bucket up to `maxWaitMs`; a longer wait defers the deliveries (due again when the bucket resets; not a failure).
 * Unknown Webhook (10015) is `gone`: the endpoint is disabled like a callback answering 410.
 */

/** Most events in one message (each a line at least; the 2,000 characters may hold fewer). */
export const DISCORD_MAX_EVENTS_PER_MESSAGE = 50;
/** How long a message waits for its rate limit before its deliveries are deferred instead. */
export const DISCORD_MAX_WAIT_MS = 20_000;
/** Room kept between a send's end (its HTTP timeout) and its deliveries' lease end. */
const LEASE_SAFETY_MS = 1_000;

export interface DiscordTransportDeps extends AttemptDeps {
  rest: DiscordRest;
  maxWaitMs?: number;
  maxEventsPerMessage?: number;
  /** Waits (the Discord client's injected clock's partner in tests); default a timer. */
  sleep?: (ms: number) => Promise<void>;
}

interface Waiting {
  delivery: ClaimedDelivery;
  resolve: (outcome: AttemptOutcome) => void;
}

/** Creates the Discord transport. */
export function createDiscordTransport(deps: DiscordTransportDeps): Transport {
  const maxWaitMs = deps.maxWaitMs ?? DISCORD_MAX_WAIT_MS;
  const maxEvents = deps.maxEventsPerMessage ?? DISCORD_MAX_EVENTS_PER_MESSAGE;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  /** Per endpoint: deliveries handed over and not yet sent, and whether a sender runs for it. */
  const endpoints = new Map<string, { waiting: Waiting[]; running: boolean }>();

  const runEndpoint = async (endpointId: string) => {
    const state = endpoints.get(endpointId)!;
    try {
      while (state.waiting.length > 0) await sendOneMessage(state.waiting);
    } finally {
      state.running = false;
      if (state.waiting.length === 0) endpoints.delete(endpointId);
      // Failure policy: a delivery handed over as the sender stopped starts the next one.
      else startSender(endpointId);
    }
  };

  const startSender = (endpointId: string) => {
    const state = endpoints.get(endpointId);
    if (!state || state.running) return;
    state.running = true;
    // Give the deliveries claimed with this one a turn to join it.
    setImmediate(() => {
      runEndpoint(endpointId).catch((error: unknown) => {
        // Failure policy: the deliveries of a failed send are given an outcome each (failed, retried on the schedule).
        const reason = error instanceof Error ? error.message : String(error);
        for (const w of state.waiting.splice(0)) w.resolve(failedOutcome(w.delivery, reason));
      });
    });
  };

  /** Sends the first waiting deliveries (and siblings leased here) as one message, and settles each. */
  const sendOneMessage = async (waiting: Waiting[]) => {
    const nowMs = deps.now().getTime();
    // A delivery is sent only inside its lease: past it, any dispatcher may claim and send it again (one event in two
    // messages). One that waited here behind earlier messages until its lease can no longer hold a send goes back due
    // now (deferred: not a failure), to be claimed again with a fresh lease.
    const leaseRoomOf = (w: Waiting) => w.delivery.leaseUntil.getTime() - nowMs - deps.timeoutMs - LEASE_SAFETY_MS;
    for (const w of waiting.filter((x) => leaseRoomOf(x) < 0)) {
      waiting.splice(waiting.indexOf(w), 1);
      w.resolve({ kind: "deferred", reason: "waited for earlier Discord messages until its lease ran short; due again now", retryAt: new Date(nowMs) });
    }
    if (waiting.length === 0) return;
    const first = waiting[0]!.delivery;
    const hook = first.discord!;
    const path = webhookPathOf({ id: hook.webhookId, token: deps.secretBox.open(hook.sealedToken) });
    const readyAt = deps.rest.readyAt({ path });
    // How long this message may wait for its rate limit, before and inside the request: at most maxWaitMs, and no longer
    // than the leases of the deliveries it takes leave room for the send itself.
    const waitBudgetMs = Math.min(maxWaitMs, ...waiting.slice(0, maxEvents).map(leaseRoomOf));
    if (readyAt !== undefined && readyAt - nowMs > waitBudgetMs) {
      const reason = `Discord rate limit: due again at ${new Date(readyAt).toISOString()}`;
      for (const w of waiting.splice(0)) w.resolve({ kind: "deferred", reason, retryAt: new Date(readyAt) });
      return;
    }
    if (readyAt !== undefined) await sleep(readyAt - nowMs);
    const taken = waiting.splice(0, maxEvents);
    try {
      await sendTaken(waiting, taken, path, hook, Math.max(0, waitBudgetMs - (deps.now().getTime() - nowMs)));
    } catch (error) {
      // Failure policy: the deliveries taken for this message and not settled yet get an outcome each (failed, retried
      // on the schedule), so the dispatcher's slots they hold are freed; the ones put back in `waiting` are settled by
      // the sender's own catch, which this error reaches next.
      const reason = error instanceof Error ? error.message : String(error);
      for (const w of taken) if (!waiting.includes(w)) w.resolve(failedOutcome(w.delivery, reason));
      throw error;
    }
  };

  /** `taken` (and siblings leased here) as one message; what does not fit goes back to the front of `waiting`. */
  const sendTaken = async (waiting: Waiting[], taken: Waiting[], path: string, hook: NonNullable<ClaimedDelivery["discord"]>, waitMs: number) => {
    const first = taken[0]!.delivery;
    const room = maxEvents - taken.length;
    const siblings =
      room > 0
        ? await leaseDueDiscordDeliveries(
            deps,
            first.endpointId!,
            room,
            [...taken, ...waiting].map((w) => w.delivery.id),
          )
        : [];
    // Lines in order; what does not fit in one message waits for the next (handed-over ones) or is given back (leased here).
    const lines: string[] = [];
    let length = 0;
    // An embed's description holds up to 4,096 characters; the content 2,000.
    const maxChars = hook.embed ? DISCORD_EMBED_DESCRIPTION_MAX_CHARS : DISCORD_CONTENT_MAX_CHARS;
    const fits = (line: string) => length + (lines.length > 0 ? 1 : 0) + [...line].length <= maxChars;
    const sentTaken: Waiting[] = [];
    for (const w of taken) {
      const line = renderLine(w.delivery);
      if (lines.length > 0 && !fits(line)) {
        waiting.unshift(...taken.slice(taken.indexOf(w)));
        break;
      }
      lines.push(line);
      length += [...line].length + (lines.length > 1 ? 1 : 0);
      sentTaken.push(w);
    }
    const sentSiblings: ClaimedDelivery[] = [];
    const givenBack: ClaimedDelivery[] = [];
    for (const d of siblings) {
      const line = renderLine(d);
      if (sentTaken.length < taken.length || !fits(line)) {
        givenBack.push(d);
        continue;
      }
      lines.push(line);
      length += [...line].length + 1;
      sentSiblings.push(d);
    }
    // Failure policy: a sibling that did not fit is given back at once (its lease released) for the next message.
    await Promise.all(givenBack.map((d) => releaseLease(deps.prisma, d)));
    const text = lines.join("\n");
    const body = hook.embed
      ? { embeds: [{ description: text }], allowed_mentions: { parse: [] as string[] } }
      : { content: text, allowed_mentions: { parse: [] as string[] } };
    const started = deps.now().getTime();
    const answer = await deps.rest.request({ method: "POST", path, query: { wait: "true" }, body, maxWaitMs: waitMs });
    const outcome = toOutcome(answer, hook.webhookId, JSON.stringify(body), deps.now().getTime() - started);
    for (const w of sentTaken) w.resolve(outcome);
    // The siblings leased here are recorded here, each with its own attempt row, as the dispatcher records its own.
    await Promise.all(
      sentSiblings.map((d) =>
        performAttempt(deps, { send: async () => outcome }, d).catch((error: unknown) => {
          // Failure policy: the lease expires and the delivery is claimed again (at-least-once, like any lost record).
          deps.log.error({ err: error, deliveryId: d.id }, "recording a batched Discord attempt failed; it is retried when the lease expires");
        }),
      ),
    );
  };

  return {
    async send(delivery) {
      if (!delivery.discord || delivery.endpointId === null) return { kind: "held", reason: "not a Discord endpoint any more" };
      const endpointId = delivery.endpointId;
      let state = endpoints.get(endpointId);
      if (!state) {
        state = { waiting: [], running: false };
        endpoints.set(endpointId, state);
      }
      const outcome = new Promise<AttemptOutcome>((resolve) => state.waiting.push({ delivery, resolve }));
      startSender(endpointId);
      return outcome;
    },
  };
}

/** One event's line: its endpoint's template for its event type (else the default), rendered with its values. */
export function renderLine(d: ClaimedDelivery): string {
  const hook = d.discord!;
  const template = hook.templates[d.eventType] ?? defaultDiscordTemplate(d.eventType);
  return renderDiscordTemplate(template, d.eventType, discordValuesOf(d, hook.serverName));
}

/** The placeholder values of a delivery. */
export function discordValuesOf(d: ClaimedDelivery, serverName: string): DiscordValues {
  const counts = d.rewardCounts;
  return {
    player: d.username,
    server: serverName,
    event: d.eventType,
    period: d.period,
    month_total: counts?.month_total ?? null,
    total: counts?.total ?? null,
    streak: counts?.reward_streak ?? null,
  };
}

/** Where an attempt went, for the log: the webhook's id, never its token. */
function targetOf(webhookId: string): string {
  return `discord://webhooks/${webhookId}`;
}

function toOutcome(answer: DiscordAnswer, webhookId: string, requestBody: string, latencyMs: number): AttemptOutcome {
  const target = targetOf(webhookId);
  const exchange = (status: number | null, body: string, error: string | null): AttemptExchange => ({
    target,
    request: { headers: { "content-type": "application/json" }, body: requestBody },
    response: status === null ? null : { status, headers: {}, body: cutToChars(body, 4096), bodyTruncated: false },
    latencyMs,
    error,
    succeeded: error === null,
  });
  switch (answer.kind) {
    case "ok":
      return { kind: "delivered", target, statusCode: answer.status, latencyMs, exchange: exchange(answer.status, JSON.stringify(answer.body ?? null), null) };
    case "rateLimited":
      return { kind: "deferred", reason: answer.error, retryAt: new Date(answer.retryAt) };
    case "error": {
      const body = JSON.stringify({ code: answer.code, message: answer.message });
      if (answer.code === DiscordErrorCode.unknownWebhook) {
        const error = `Discord answered ${answer.status} Unknown Webhook (10015): the webhook was deleted; endpoint disabled, deliveries held until re-enabled`;
        return { kind: "gone", target, statusCode: answer.status, latencyMs, error, exchange: exchange(answer.status, body, error) };
      }
      return { kind: "failed", target, statusCode: answer.status, error: answer.error, latencyMs, exchange: exchange(answer.status, body, answer.error) };
    }
    case "failed":
      return { kind: "failed", target, statusCode: null, error: answer.error, latencyMs, exchange: exchange(null, "", answer.error) };
  }
}

function failedOutcome(d: ClaimedDelivery, error: string): SentOutcome {
  const target = targetOf(d.discord?.webhookId ?? "");
  return {
    kind: "failed",
    target,
    statusCode: null,
    error,
    latencyMs: 0,
    exchange: { target, request: { headers: {}, body: "" }, response: null, latencyMs: 0, error, succeeded: false },
  };
}

/**
 * Leases up to `limit` other due Discord deliveries of `endpointId` (pending, unparked, due, never leased: a row
 * whose lease ran out is the dispatcher's to take over), not among `exclude`, oldest due first, locked with SKIP
 * LOCKED so two dispatchers never take the same row. Reads at most `limit` rows (plus the locked ones it skips)
 * through deliveries_discord_due_idx, and their server and endpoint by key.
 */
async function leaseDueDiscordDeliveries(deps: DiscordTransportDeps, endpointId: string, limit: number, exclude: string[]): Promise<ClaimedDelivery[]> {
  const now = deps.now();
  const rows = await runSql<LeasedRow>(
    deps.prisma,
    Prisma.sql`
    WITH chosen AS (
      SELECT d.id, d.server_id, d.endpoint_id, NULL::timestamptz AS previous_lease, NULL::date AS last_day, NULL::int AS streak_days
      FROM deliveries d
      WHERE d.endpoint_id = ${endpointId}::uuid AND d.status = 'pending' AND d.transport = 'discord' AND d.parked_at IS NULL
        AND d.next_attempt_at <= ${now}::timestamptz AND d.lease_until IS NULL AND d.id <> ALL(${exclude}::uuid[])
      ORDER BY d.next_attempt_at
      LIMIT ${limit}::int
      FOR UPDATE OF d SKIP LOCKED
    )
    ${leaseDeliveriesSql({
      chosen: Prisma.sql`chosen v JOIN servers s ON s.id = v.server_id LEFT JOIN callback_endpoints e ON e.id = v.endpoint_id`,
      leaseUntil: new Date(now.getTime() + deps.timeoutMs + LEASE_MARGIN_MS),
      workerId: null,
      returning: claimedColumnsSql(now),
    })}`,
  );
  return rows.map((r) => toClaimedDelivery(r, now)).filter((d) => d.discord);
}
