import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Counter } from "prom-client";
import { PluginCallOutcome, PluginCallSchema, type PluginCall, type RecordPluginCallsRequestSchema } from "../gen/proto/claims/v1/plugin_activity_pb.js";
import type { Logger } from "../services/shared/runtime/log.js";
import type { Metrics } from "../services/shared/runtime/metrics.js";
import { isUuid } from "../services/shared/values/ids.js";
import { MAX_PLUGIN_CALL_PLAYER_ID_CHARS, MAX_PLUGIN_CALLS_PER_BATCH } from "../services/shared/values/plugin-call-limits.js";
import { claimKeyLookupHash } from "../services/shared/runtime/secrets.js";
import { parseVoteQuery, type VoteClaimResult } from "./handle-vote-claim.js";
import type { RewardQueueResult } from "./handle-reward-queue.js";
import { PlayerIdKind } from "../gen/proto/claims/v1/claims_pb.js";

/**
 * The plugin activity card's feed (issue 33): what each reward plugin's check/claim call got, recorded off the
 * request path. The route hands every answered call to `record` (memory only, never awaited); a timer sends
 * the calls in batches over ONE RPC (PluginActivityService.RecordPluginCalls), which the referral service
 * writes with one statement per batch. The buffer is bounded: past PLUGIN_CALL_BUFFER_MAX a call is dropped
 * and counted (`plugin_calls_dropped_total{reason="buffer_full"}`), as are the calls of a batch the service
 * refused (`reason="send_failed"`): the card is advisory, a plugin's answer never waits for it. What is sent:
 * the path, the id kind, the outcome and answer, the player id, the server the answer named - else the key's
 * SHA-256 (what the database keeps to find a key; the service matches it and keeps nothing of it) and the
 * server the URL names (`server=`). Never the key, never the client's address.
 */

/** How often buffered calls are sent. */
export const PLUGIN_CALL_FLUSH_MS = 1_000;
/** Calls per RecordPluginCalls request at most (the request's own bound); a full batch is sent at once, without waiting for the timer. */
export const PLUGIN_CALL_BATCH_MAX = MAX_PLUGIN_CALLS_PER_BATCH;
/** Calls held at most while they wait to be sent; more are dropped and counted. */
export const PLUGIN_CALL_BUFFER_MAX = 5_000;
/** Deadline of one RecordPluginCalls call. */
const RECORD_RPC_TIMEOUT_MS = 5_000;

/** The outcome of each answered RPC outcome of handleVoteClaim (its `outcome` texts); others are not recorded. */
const OUTCOMES: Readonly<Record<string, PluginCallOutcome>> = {
  wrong_key: PluginCallOutcome.WRONG_KEY,
  invalid_player_id: PluginCallOutcome.MALFORMED_ID,
  check_not_found: PluginCallOutcome.NEVER_VOTED,
  claim_not_found: PluginCallOutcome.NEVER_VOTED,
  check_voted_unclaimed: PluginCallOutcome.OK,
  check_already_claimed: PluginCallOutcome.OK,
  check_paid_elsewhere: PluginCallOutcome.OK,
  claim_claimed_now: PluginCallOutcome.OK,
  claim_already_claimed: PluginCallOutcome.OK,
  claim_paid_elsewhere: PluginCallOutcome.OK,
};

/** One answered check/claim request: the route's path, the raw query, and what handleVoteClaim answered. */
export interface AnsweredVoteClaim {
  path: string;
  query: string;
  jsonPath: boolean;
  result: VoteClaimResult;
  at: Date;
}

/**
 * The record of an answered check/claim call, or undefined for one the card does not show: a request the gateway
 * answered without asking the service (unknown action, missing key or player id, the guess limiter), a 503 or a 500.
 */
export function toPluginCall(answered: AnsweredVoteClaim): PluginCall | undefined {
  const outcome = OUTCOMES[answered.result.outcome];
  const parsed = parseVoteQuery(answered.query, answered.jsonPath);
  if (outcome === undefined || parsed.kind !== "ask") return undefined;
  const serverId = answered.result.serverId ?? "";
  const urlServerId = (new URLSearchParams(answered.query).get("server") ?? "").trim();
  // The JSON family's answer is its status (the outcome's part after the action); a wrong key and a malformed id get not_found.
  const status = answered.result.outcome.startsWith(`${parsed.action}_`) ? answered.result.outcome.slice(parsed.action.length + 1) : "not_found";
  const answer = parsed.json ? status : String(answered.result.reply.body);
  return create(PluginCallSchema, {
    at: timestampFromDate(answered.at),
    family: answered.path,
    playerIdKind: parsed.player.kind,
    outcome,
    action: parsed.action,
    answer,
    serverId,
    claimKeySha256: serverId === "" ? claimKeyLookupHash(parsed.key) : "",
    urlServerId: serverId === "" && isUuid(urlServerId) ? urlServerId : "",
    playerId: parsed.player.value.slice(0, MAX_PLUGIN_CALL_PLAYER_ID_CHARS),
  });
}

/** The outcome of each answered reward queue outcome (handle-reward-queue.ts); bad input, the limiter, 503 and 500 are not recorded. */
const QUEUE_OUTCOMES: Readonly<Record<string, PluginCallOutcome>> = {
  wrong_key: PluginCallOutcome.WRONG_KEY,
  queue_listed: PluginCallOutcome.OK,
  queue_empty: PluginCallOutcome.OK,
  acked: PluginCallOutcome.OK,
  acked_some_unknown: PluginCallOutcome.OK,
};

/** One answered reward queue request: the route's path, the raw query, which call, and what the handler answered. */
export interface AnsweredQueueCall {
  path: string;
  query: string;
  action: "list" | "ack";
  result: RewardQueueResult;
  at: Date;
}

/**
 * The record of an answered reward queue call (docs/reward-queue.md), or undefined for one the card does not show. It
 * names no player (the kind is unspecified, stored as `none`); its answer is the outcome (`queue_listed`, `queue_empty`,
 * `acked`, `acked_some_unknown`, `wrong_key`); a wrong key is attributed by the key's SHA-256 only (the URL names no server).
 */
export function toQueuePluginCall(answered: AnsweredQueueCall): PluginCall | undefined {
  const outcome = QUEUE_OUTCOMES[answered.result.outcome];
  const key = new URLSearchParams(answered.query).get("key") ?? "";
  if (outcome === undefined || key === "") return undefined;
  const serverId = answered.result.serverId ?? "";
  return create(PluginCallSchema, {
    at: timestampFromDate(answered.at),
    family: answered.path,
    playerIdKind: PlayerIdKind.UNSPECIFIED,
    outcome,
    action: answered.action,
    answer: answered.result.outcome,
    serverId,
    claimKeySha256: serverId === "" ? claimKeyLookupHash(key) : "",
  });
}

/** Holds answered calls and sends them in batches; `stop` sends what is held and stops the timer. */
export interface PluginCallRecorder {
  /** Buffers one call (never waits); dropped and counted when the buffer is full. */
  record(call: PluginCall): void;
  /** Sends every held call now (tests; shutdown). */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

/** Builds the recorder over `send` (RecordPluginCalls with the gateway's token). */
export function createPluginCallRecorder(opts: {
  send: (request: MessageInitShape<typeof RecordPluginCallsRequestSchema>, call: { timeoutMs: number }) => Promise<unknown>;
  log: Logger;
  metrics: Metrics;
  flushMs?: number;
  batchMax?: number;
  bufferMax?: number;
}): PluginCallRecorder {
  const flushMs = opts.flushMs ?? PLUGIN_CALL_FLUSH_MS;
  const batchMax = opts.batchMax ?? PLUGIN_CALL_BATCH_MAX;
  const bufferMax = opts.bufferMax ?? PLUGIN_CALL_BUFFER_MAX;
  const dropped = droppedCounter(opts.metrics);
  let buffer: PluginCall[] = [];
  let timer: NodeJS.Timeout | undefined;
  let sending: Promise<void> | undefined;
  let failing = false;

  const sendBatch = async (calls: PluginCall[]) => {
    try {
      await opts.send({ calls }, { timeoutMs: RECORD_RPC_TIMEOUT_MS });
      if (failing) opts.log.info("plugin activity calls are recorded again");
      failing = false;
    } catch (error) {
      // Failure policy: drop and count - the activity card is advisory and never worth a plugin's answer or unbounded memory;
      // logged once per outage (the next batch that goes through says so).
      dropped.inc({ reason: "send_failed" }, calls.length);
      if (!failing) opts.log.warn({ err: error, calls: calls.length }, "plugin activity calls could not be recorded (RecordPluginCalls); dropped");
      failing = true;
    }
  };
  // One send in flight at a time: it takes what is held then; what arrives meanwhile waits for the next.
  const flush = (): Promise<void> => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    if (sending !== undefined || buffer.length === 0) return sending ?? Promise.resolve();
    const taken = buffer;
    buffer = [];
    sending = (async () => {
      for (let i = 0; i < taken.length; i += batchMax) await sendBatch(taken.slice(i, i + batchMax));
    })().finally(() => {
      sending = undefined;
      if (buffer.length >= batchMax) void flush();
      else schedule();
    });
    return sending;
  };
  const schedule = () => {
    if (timer !== undefined || sending !== undefined || buffer.length === 0) return;
    timer = setTimeout(() => void flush(), flushMs);
    timer.unref();
  };
  return {
    record(call) {
      if (buffer.length >= bufferMax) {
        dropped.inc({ reason: "buffer_full" });
        return;
      }
      buffer.push(call);
      if (buffer.length >= batchMax) void flush();
      else schedule();
    },
    async flush() {
      await sending;
      await flush();
    },
    stop() {
      return this.flush();
    },
  };
}

const DROPPED_METRIC = "plugin_calls_dropped_total";

/** The drop counter on the process's registry (one per registry, however many gateways share it). */
function droppedCounter(metrics: Metrics): Counter<"reason"> {
  const existing = metrics.registry.getSingleMetric(DROPPED_METRIC);
  if (existing !== undefined) return existing as Counter<"reason">;
  return new Counter({
    name: DROPPED_METRIC,
    help: "Reward plugins' check/claim calls the plugin activity card will not show: buffer_full (more waiting than PLUGIN_CALL_BUFFER_MAX), send_failed (RecordPluginCalls failed).",
    labelNames: ["reason"] as const,
    registers: [metrics.registry],
  });
}
