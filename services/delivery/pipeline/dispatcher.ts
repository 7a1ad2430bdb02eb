import { Counter, Histogram, type Registry } from "prom-client";
import { createAttemptRecorder } from "./attempt-recorder.js";
import { createCallbackTransport } from "./callback-transport.js";
import { decideClaim, decideInsertLease, leavesBacklog, type DispatcherLoad } from "./claim-decision.js";
import { performAttempt, type AttemptDeps, type SentOutcome } from "./perform-attempt.js";
import { createCallbackAgents } from "./send-callback.js";
import type { AttemptResult } from "./attempt-log.js";
import { busyServersOf, claimDueDeliveries, type ClaimedDelivery } from "./claim-deliveries.js";
import type { InsertedDeliveries, InsertLease } from "./insert-deliveries.js";
import { createServerCaps, maxServerCap, toCapAnswer } from "./server-caps.js";
import type { AttemptOutcome, SentTransport, Transport } from "./transport.js";
import { createVotifierTransport } from "./votifier-transport.js";
import { createDiscordTransport } from "./discord-transport.js";
import { createDiscordRest, type DiscordRest } from "../../shared/adapters/discord-rest.js";
import { markTakenOverInDoubt } from "./pay-once.js";
import { startWorkerLiveness, type WorkerLiveness } from "./worker-liveness.js";
import { LEASE_MARGIN_MS } from "./lease.js";

/** Default number of attempts one dispatcher runs at once, over all servers. */
export const DEFAULT_DISPATCH_CONCURRENCY = 128;
/**
 * Default attempts in flight per server to start with, and what a slow or failing server falls back
 * to, so one slow receiver uses few slots; a server answering fast gets more (server-caps.ts).
 */
export const DEFAULT_PER_SERVER_CONCURRENCY = 4;
/** Default pause between claims when nothing is due. */
export const DEFAULT_POLL_INTERVAL_MS = 1_000;
/** The dispatcher's dependencies and settings. */
export interface DispatcherOptions extends AttemptDeps {
  /** Replaces the transports (tests); by default the HTTP callback and Votifier v2. */
  transports?: Partial<Record<SentTransport, Transport>>;
  concurrency?: number;
  /** A server's small cap: where it starts, and what it falls back to when slow or failing. */
  perServerConcurrency?: number;
  /** The most a fast server's cap grows to; default a quarter of the concurrency (maxServerCap). */
  maxPerServerConcurrency?: number;
  pollIntervalMs?: number;
  /** When given, attempt counters and latencies are registered here. */
  registry?: Registry;
  /** How often this dispatcher beats in delivery_workers (worker-liveness.ts); tests may shorten it. */
  heartbeatMs?: number;
  /** The Discord API base URL of the Discord transport's client (default Discord's; DISCORD_API_BASE_URL in development and tests). */
  discordApiBaseUrl?: string;
  /** The process's one Discord client, shared with its other Discord callers (voter roles); its owner closes it. */
  discord?: DiscordRest;
  /** Replaces the claim statement (tests count its runs); by default claimDueDeliveries. */
  claim?: typeof claimDueDeliveries;
}

/** A running dispatcher. */
export interface Dispatcher {
  start(): void;
  /** Stops claiming and waits for in-flight attempts to finish. */
  stop(): Promise<void>;
  /** Claims now instead of at the next poll (for example right after new deliveries were stored). */
  wake(): void;
  /**
   * Runs `insert` (insertAndLeaseDeliveries) with this dispatcher's free room as its lease, unless
   * decideInsertLease (claim-decision.ts) says no: a claim is running, the last claim left due rows
   * behind (older rows go first), the recorder is behind or no slot is free; then the lease is
   * undefined. Sends the rows it leased at once, and claims when it left sendable rows unleased.
   */
  withInsertLease(insert: (lease: InsertLease | undefined) => Promise<InsertedDeliveries>): Promise<InsertedDeliveries>;
  /** Attempts in flight, by server id. */
  inFlight(): ReadonlyMap<string, number>;
  /** A server's cap of attempts in flight now (server-caps.ts). */
  capOf(serverId: string): number;
}

/**
 * Claims due deliveries in batches and sends each one independently over its transport (the
 * HTTP callback over keep-alive pools per destination, or Votifier v2): a claimed attempt is
 * never awaited as part of a batch, and per-server in-flight caps keep one hanging receiver from
 * taking every slot, so other servers' deliveries go out on time; a server's cap grows while it
 * answers fast and falls back when it answers slowly or fails (server-caps.ts). A slot is free again once the
 * receiver answered; the attempt is then recorded with the others that finished meanwhile (group
 * commit, createAttemptRecorder). Safe with several instances (claims use FOR UPDATE SKIP
 * LOCKED + leases, and results are recorded only under the lease).
 */
export function createDispatcher(opts: DispatcherOptions): Dispatcher {
  const concurrency = opts.concurrency ?? DEFAULT_DISPATCH_CONCURRENCY;
  const perServer = opts.perServerConcurrency ?? DEFAULT_PER_SERVER_CONCURRENCY;
  const pollIntervalMs = opts.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
  const caps = createServerCaps({ base: perServer, max: opts.maxPerServerConcurrency ?? maxServerCap(concurrency, perServer) });
  const metrics = opts.registry ? createDispatchMetrics(opts.registry) : undefined;
  // The process's one Discord client: its rate-limit state is shared by every Discord delivery of this dispatcher.
  const ownDiscord = opts.discord === undefined;
  const discordRest = opts.discord ?? createDiscordRest(opts.discordApiBaseUrl === undefined ? {} : { baseUrl: opts.discordApiBaseUrl });
  const agents = opts.transports?.callback ? undefined : createCallbackAgents({ maxSocketsPerDestination: concurrency, allowInsecure: opts.allowInsecure });
  const transports: Record<SentTransport, Transport> = {
    callback: opts.transports?.callback ?? createCallbackTransport({ ...opts, ...(agents ? { agents } : {}) }),
    votifier: opts.transports?.votifier ?? createVotifierTransport({ secretBox: opts.secretBox, allowInsecure: opts.allowInsecure }),
    discord: opts.transports?.discord ?? createDiscordTransport({ ...opts, rest: discordRest }),
  };
  const recorder = createAttemptRecorder({ prisma: opts.prisma, log: opts.log });
  const inFlightByServer = new Map<string, number>();
  /** Attempts from claim until recorded. */
  const running = new Set<Promise<void>>();
  /** Attempts from claim until the receiver answered: what the concurrency bounds. */
  let sending = 0;
  /** Attempts that finished sending since the last claim. */
  let freedSinceClaim = 0;
  let active = false;
  let loop: Promise<void> | undefined;
  /** This dispatcher's row in delivery_workers, once inserted: its leases carry the id. */
  let liveness: WorkerLiveness | undefined;
  let livenessFailed = false;
  let wakeSleeper: (() => void) | undefined;
  let wakeRequested = false;
  /** Room handed to an insert's lease (withInsertLease) until its rows are tracked: a claim meanwhile does not count on it. */
  let reserved = 0;
  /** A claim statement is running. */
  let claiming = false;
  /** The last claim filled its limit: due rows may be waiting, and they go before new ones. */
  let backlog = false;
  /** A claim was asked for (wake(), or an insert left sendable rows unleased) and has not started yet. */
  let claimWanted = false;
  /**
   * Servers that may have more due rows than their room let a claim take (a claim filled their
   * room, or they were at their cap and left out of it): a slot of theirs freed calls for a claim.
   */
  const mayHaveMore = new Set<string>();

  const rouse = () => {
    wakeRequested = true;
    wakeSleeper?.();
  };
  const wake = () => {
    claimWanted = true;
    rouse();
  };
  /**
   * A slot of `serverId` is free again: the claim loop is roused only when a claim may find rows
   * (due rows left behind, a claim asked for, or this server may have more); otherwise the room
   * waits for the consumer's next insert to lease it (no claim statement), or for the poll.
   */
  const slotFreed = (serverId: string) => {
    if (backlog || claimWanted || mayHaveMore.has(serverId)) rouse();
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      if (wakeRequested || !active) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wakeSleeper = undefined;
        resolve();
      }
      wakeSleeper = done;
    });

  const track = (delivery: ClaimedDelivery) => {
    inFlightByServer.set(delivery.serverId, (inFlightByServer.get(delivery.serverId) ?? 0) + 1);
    sending++;
    let sent = false;
    const freeSlot = (outcome?: AttemptOutcome) => {
      if (sent) return;
      sent = true;
      sending--;
      freedSinceClaim++;
      const inFlight = inFlightByServer.get(delivery.serverId) ?? 1;
      caps.record(delivery.serverId, toCapAnswer(outcome), inFlight);
      const left = inFlight - 1;
      if (left <= 0) inFlightByServer.delete(delivery.serverId);
      else inFlightByServer.set(delivery.serverId, left);
      slotFreed(delivery.serverId);
    };
    const task = attempt(delivery, freeSlot)
      .catch((error: unknown) => {
        // Failure policy: the lease expires and the delivery is claimed again later; at-least-once, receivers dedupe on heart_id.
        opts.log.error({ err: error, deliveryId: delivery.id }, "delivery attempt failed before its result was recorded; it is retried when the lease expires");
      })
      .finally(() => {
        freeSlot(undefined);
        running.delete(task);
        slotFreed(delivery.serverId);
      });
    running.add(task);
  };

  /** This dispatcher's load now, for the claim decisions (claim-decision.ts). */
  const load = (): DispatcherLoad => ({ concurrency, sending, reserved, unrecorded: recorder.pending() });

  const claimLoop = async () => {
    /** Since when a claim has waited for more free slots (a `wait` decision's `sinceMs`), or undefined. */
    let waitingSince: number | undefined;
    while (active) {
      wakeRequested = false;
      if (liveness === undefined) await startLiveness();
      const nowMs = performance.now();
      const decision = decideClaim({ ...load(), freedSinceClaim, waitingSinceMs: waitingSince, nowMs });
      if (decision.kind === "wait") {
        waitingSince = decision.sinceMs;
        await sleep(decision.untilMs - nowMs);
        continue;
      }
      if (decision.kind === "claim") {
        waitingSince = undefined;
        freedSinceClaim = 0;
        claimWanted = false;
        claiming = true;
        try {
          const terms = { ...room(), limit: decision.limit };
          const claimed = await (opts.claim ?? claimDueDeliveries)(opts.prisma, terms);
          await recordTakenOver(claimed, terms.now);
          for (const delivery of claimed) track(delivery);
          backlog = leavesBacklog(claimed.length, decision.limit);
          noteServersLeft(terms, claimed);
          // A full claim means more may be due: claim again at once.
          if (backlog && active) continue;
        } catch (error) {
          // Failure policy: the database may be briefly away; log and try again at the next poll.
          opts.log.error({ err: error }, "claiming deliveries failed");
        } finally {
          claiming = false;
        }
      }
      await sleep(pollIntervalMs);
    }
  };

  /**
   * After a claim with `terms`: a server whose room it filled may have more due rows, and so may
   * one it left out at its cap; a server it took fewer rows of than its room has none left.
   */
  function noteServersLeft(terms: InsertLease, claimed: readonly ClaimedDelivery[]): void {
    const taken = new Map<string, number>();
    for (const d of claimed) taken.set(d.serverId, (taken.get(d.serverId) ?? 0) + 1);
    const { ids, inFlight, caps: capList, saturated } = busyServersOf(terms);
    for (const id of saturated) mayHaveMore.add(id);
    const roomOf = new Map(ids.map((id, i) => [id, capList[i]! - inFlight[i]!]));
    for (const [id, n] of taken) {
      if (n >= (roomOf.get(id) ?? terms.perServerLimit)) mayHaveMore.add(id);
      else mayHaveMore.delete(id);
    }
    // Not taken and not at its cap: none of its rows were due (or the claim was full, and backlog calls the next one).
    for (const id of [...mayHaveMore]) if (!taken.has(id) && !saturated.includes(id)) mayHaveMore.delete(id);
    // A slot of such a server freed while the claim ran did not call for a claim (it was not marked yet): claim again now.
    if ([...mayHaveMore].some((id) => (inFlightByServer.get(id) ?? 0) < caps.capOf(id))) rouse();
  }

  /** Inserts this dispatcher's liveness row; until it is in, leases carry no worker and last until they run out. */
  async function startLiveness(): Promise<void> {
    try {
      liveness = await startWorkerLiveness(opts.prisma, opts.log, opts.heartbeatMs);
    } catch (error) {
      // Failure policy: leases without a worker id are only taken over when they run out (the slower, still correct
      // recovery); tried again before each claim, logged once.
      if (!livenessFailed) opts.log.warn({ err: error }, "starting the delivery worker heartbeat failed; leases last until they run out");
      livenessFailed = true;
    }
  }

  /**
   * Claimed rows whose earlier lease ran out unrecorded: that attempt is logged as in doubt and its
   * reservation kept in doubt (pay-once.ts) before the rows are sent again.
   */
  async function recordTakenOver(claimed: readonly ClaimedDelivery[], now: Date): Promise<void> {
    const takenOver = claimed.filter((d) => d.takenOver === true);
    if (takenOver.length === 0) return;
    try {
      await markTakenOverInDoubt(opts.prisma, takenOver, now);
    } catch (error) {
      // Failure policy: the rows are sent anyway; the lost attempt's row is missing from the log, and a pay-once reservation
      // that stays `reserved` is still this delivery's (its retry carries the same heart_id), never another transport's.
      opts.log.warn({ err: error, deliveries: takenOver.length }, "recording taken-over attempts as in doubt failed");
    }
  }

  /** This dispatcher's lease terms now (the claim's and an insert's): until when, and per-server room. */
  function room(): Omit<InsertLease, "limit"> {
    const now = opts.now();
    return {
      now,
      leaseUntil: new Date(now.getTime() + opts.timeoutMs + LEASE_MARGIN_MS),
      perServerLimit: perServer,
      inFlightByServer: new Map(inFlightByServer),
      capByServer: new Map(caps.raised()),
      ...(liveness ? { workerId: liveness.id } : {}),
    };
  }

  async function withInsertLease(insert: (lease: InsertLease | undefined) => Promise<InsertedDeliveries>): Promise<InsertedDeliveries> {
    const decision = decideInsertLease({ ...load(), active, claiming, backlog });
    const offer = decision.kind === "lease" ? decision.limit : 0;
    reserved += offer;
    let stored: InsertedDeliveries;
    try {
      stored = await insert(offer > 0 ? { ...room(), limit: offer } : undefined);
    } finally {
      // Failure policy: an insert that failed leased nothing (its statement rolled back); the room is free again.
      reserved -= offer;
    }
    for (const delivery of stored.leased) track(delivery);
    if (stored.leftForClaim) wake();
    return stored;
  }

  async function attempt(delivery: ClaimedDelivery, onSent: (outcome: AttemptOutcome | undefined) => void): Promise<void> {
    const report = await performAttempt(opts, transports[delivery.transport], delivery, { onSent, record: recorder.record });
    if (report.kind === "released") return;
    const { outcome, result, owned } = report;
    metrics?.record(delivery.transport, outcome, result);
    const logFields = {
      deliveryId: delivery.id,
      heartId: delivery.heartId,
      serverId: delivery.serverId,
      transport: delivery.transport,
      outcome: outcome.kind,
      result: result.kind,
    };
    if (!owned) opts.log.warn(logFields, "lease lost before the attempt was recorded; the attempt is logged only");
    else if (result.kind === "delivered") opts.log.debug(logFields, "delivered");
    else opts.log.info({ ...logFields, status: outcome.statusCode, error: outcome.kind === "delivered" ? undefined : outcome.error }, "not delivered");
  }

  return {
    start() {
      if (active) return;
      active = true;
      loop = claimLoop();
    },
    async stop() {
      active = false;
      wakeSleeper?.();
      await loop;
      await Promise.allSettled([...running]);
      await agents?.destroy();
      if (ownDiscord) await discordRest.close();
      try {
        await liveness?.stop();
      } catch (error) {
        // Failure policy: the row is left to look dead (no lease of this worker remains); a starting dispatcher deletes it later.
        opts.log.warn({ err: error }, "deleting the delivery worker row failed");
      }
      liveness = undefined;
    },
    wake,
    withInsertLease,
    inFlight: () => inFlightByServer,
    capOf: (serverId) => caps.capOf(serverId),
  };
}

function createDispatchMetrics(registry: Registry) {
  const attempts = new Counter({
    name: "callback_attempts_total",
    help: "Delivery attempts, by transport (callback, votifier, discord), outcome (delivered, failed, gone) and result (delivered, retry, failed, held_gone).",
    labelNames: ["transport", "outcome", "result"] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: "callback_attempt_duration_seconds",
    help: "Delivery attempt latency in seconds, by transport.",
    labelNames: ["transport"] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  return {
    record(transport: SentTransport, outcome: SentOutcome, result: AttemptResult) {
      attempts.inc({ transport, outcome: outcome.kind, result: result.kind });
      latency.observe({ transport }, outcome.latencyMs / 1000);
    },
  };
}
