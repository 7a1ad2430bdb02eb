/**
 * A closed-loop HTTP/1.1 load generator in a child process of its own (so its
 * event loop does not share a thread with the servers under test; it still shares
 * the machine's cores). `concurrency` workers each send one request, wait for the
 * whole response, record the latency and send the next, over a keep-alive
 * node:http Agent with one socket per worker. Bodies are ingest events signed the
 * way a caller would sign them (node:crypto HMAC over "<t>.<raw body>").
 *
 * Closed loop: a slow server slows the senders down, so the latencies are service
 * times at that concurrency, not response times under a fixed arrival rate
 * (coordinated omission); compare figures at the same concurrency only.
 */
import { fork, type ChildProcess } from "node:child_process";
import { createHmac } from "node:crypto";
import { fileURLToPath } from "node:url";
import { summarize, type LatencySummary } from "./stats.js";

/** How the signed ingest bodies of a job are made: one distinct token per index. */
export interface IngestBodySpec {
  serverId: string;
  /** The referral secret the caller signs with. */
  secret: string;
  /** Token i is `${tokenPrefix}${i}`; the referee and server_event_id derive from it. */
  tokenPrefix: string;
  /** First index used. */
  start: number;
  /** One past the last index that has a click record. */
  end: number;
  /** Wrap around at `end` (replays, dry runs); otherwise stop once the tokens run out. */
  cycle: boolean;
  /** Send `test: true` (the dry-run path). */
  test: boolean;
  /** The event sent for every token (default `registered`; `qualified` and `reversed` follow a token's registration). */
  event?: "registered" | "qualified" | "reversed";
}

/** How the CastHeart calls of a `cast` job are made: one fresh voter per call. */
export interface CastSpec {
  /** Bearer token of the referral service (scope hearts:cast or admin). */
  token: string;
  /** Hearts go round-robin over these servers (one entry: every heart to ONE server). */
  serverIds: string[];
  /** Voter i is `${voterPrefix}${i}`; its IP is derived from i so fraud scoring lets it count. */
  voterPrefix: string;
  /** First voter index. */
  start: number;
  /** Return each counted heart's id with its (intended) start, epoch ms (latency phases). */
  recordHearts: boolean;
  /** Per-call deadline. */
  timeoutMs: number;
  /** Give voter i the SteamID64 `steamIdOf(i)` (the claims phase's hearts). */
  steamIds?: boolean;
}

/** The first SteamID64 (services/shared/values/player-ids.ts); voter i of a cast job with steamIds gets this + i. */
export const STEAM_ID64_BASE = 76561197960265728n;

/** The SteamID64 of voter index `i`. */
export function steamIdOf(i: number): string {
  return (STEAM_ID64_BASE + BigInt(i)).toString();
}

/** How the check/claim GETs of a `votes` job are made (the reward plugins' calls, issue 19). */
export interface VotesSpec {
  /** The server's claim key. */
  key: string;
  /** Voter indexes whose SteamID64 (steamIdOf) the requests ask about, in order. */
  ids: number[];
  /** Start over at the end of `ids` (checks); otherwise stop once they are used (claims: each once). */
  cycle: boolean;
  /** check or claim; requests alternate the two digit families (rust-servers.net's `object=votes&element=claim`, and `action=status|claim`). */
  action: "check" | "claim";
  /** Send `Connection: close` and open a new connection per request, as the plugins do; else keep-alive. */
  connectionClose: boolean;
}

/** How the plugins of a `pull` job poll the signed pull API (one plugin per server, as a game server runs one). */
export interface PullSpec {
  /** The pull-enabled servers and their pull secrets; worker i is the plugin of server i (concurrency = servers.length). */
  servers: Array<{ serverId: string; secret: string }>;
  /**
   * `list`: each plugin walks its server's pages with the cursor (starting over after the last) and claims nothing;
   * `claim`: each plugin lists its first page and claims the hearts listed, then again (a plugin catching up on a backlog).
   */
  mode: "list" | "claim";
  /** The page size each list asks for (1-500). */
  limit: number;
  /** The claim endpoint's URL on each gateway, in the order of the job's urls (the list endpoint's). */
  claimUrls: string[];
}

/** How the reward plugins of a `queue` job poll their reward queues (run-queue-plugins.ts; an open loop at the job's rate). */
export interface QueueSpec {
  /** The servers' claim keys; poll n uses key n mod keys.length (from `startAt`). */
  keys: string[];
  /** `poll`: list only; `pollAck`: a list that found entries is followed by their acknowledgement. */
  mode: "poll" | "pollAck";
  /** The players each poll names as online (empty: the whole queue). */
  online: string[];
  /** The list's and the acknowledgement's paths on every target. */
  listPath: string;
  ackPath: string;
  /** The first poll's key index (a round continues where the last stopped, so each server is polled in turn). */
  startAt?: number;
}

/** What the plugins of a `queue` job did. */
export interface QueueCounts {
  polls: number;
  acks: number;
  entriesListed: number;
  entriesAcked: number;
  /** Polls that found nothing pending (most of a list's servers, most of the time). */
  emptyPolls: number;
  pollLatency: LatencySummary;
  ackLatency: LatencySummary;
}

/** What the plugins of a `pull` job did, by request kind. */
export interface PullCounts {
  lists: number;
  claims: number;
  /** Hearts the claims answered `claimed`. */
  claimedHearts: number;
  /** Lists that found no heart (a drained backlog: in `claim` mode the window then measures polls of nothing). */
  emptyLists: number;
  listLatency: LatencySummary;
  claimLatency: LatencySummary;
}

/** The raw callback loop's HTTP client: undici request() through one Agent, or through one Pool per receiver origin. */
export interface RawClientShape {
  dispatcher: "agent" | "pool";
  /** Connections in all (split evenly over the origins). */
  connections: number;
  /** Requests in flight per connection. */
  pipelining: number;
}

/** `agent:32:1` -> its shape. */
export function parseRawShape(text: string): RawClientShape {
  const [dispatcher, connections, pipelining] = text.split(":");
  if ((dispatcher !== "agent" && dispatcher !== "pool") || !Number(connections) || !Number(pipelining))
    throw new Error(`bad raw callback client shape ${JSON.stringify(text)}: expected agent|pool:<connections>:<pipelining>`);
  return { dispatcher, connections: Number(connections), pipelining: Number(pipelining) };
}

/** A shape's label: `undici Agent, 32 connections, pipelining 1`. */
export function rawShapeLabel(shape: RawClientShape): string {
  return `undici ${shape.dispatcher === "agent" ? "Agent" : "Pool per origin"}, ${shape.connections} connections, pipelining ${shape.pipelining}`;
}

/** One measured run. */
export interface LoadJob {
  label: string;
  /**
   * `ingest` (default): signed HTTP POSTs to the gateway; `cast`: CastHeart over Connect;
   * `callback`: the raw baseline of callbacks, signed callback POSTs over undici keep-alive;
   * `votes`: the reward plugins' check/claim GETs (issue 19); `pull`: game servers' plugins on the signed pull API.
   */
  kind?: "ingest" | "cast" | "callback" | "votes" | "pull" | "queue";
  /** Full URL, always on 127.0.0.1 (ingest: the events URL; cast: the referral service's base URL). */
  url: string;
  /** Several targets (scale-out): requests go round-robin over them; default [url]. */
  urls?: string[];
  /** Closed loop: workers. Open loop (ratePerSecond set): the most requests in flight at once. */
  concurrency: number;
  /** Open loop at this offered rate; latency counts from each request's intended start. */
  ratePerSecond?: number;
  durationMs: number;
  body: IngestBodySpec;
  cast?: CastSpec;
  /** callback jobs: the callback secret and server id the raw POSTs are signed for. */
  callback?: { secret: string; serverId: string; shape: RawClientShape };
  /** votes jobs: what to ask. */
  votes?: VotesSpec;
  /** pull jobs: the servers, what each plugin does, the page size. */
  pull?: PullSpec;
  /** queue jobs: the keys, what each plugin does. */
  queue?: QueueSpec;
  /** Stop after this many requests (closed loop), even before durationMs. */
  maxRequests?: number;
  expectStatus: number;
  /** A substring every expected response body contains. */
  expectContains: string;
  /** The exact expected response body (votes jobs: one digit). */
  expectBody?: string;
}

/** What a run measured. */
export interface LoadResult {
  label: string;
  concurrency: number;
  /** Responses received (expected or not). */
  requests: number;
  /** Responses with the expected status and body. */
  ok: number;
  /** Responses with another status or body. */
  unexpected: number;
  /** Transport errors (connection refused, reset). */
  errors: number;
  /** The first unexpected answer, for diagnosis. */
  sampleUnexpected?: string;
  elapsedMs: number;
  /** Expected responses per second. */
  requestsPerSecond: number;
  latency: LatencySummary;
  /** The next unused token index (for jobs that do not cycle). */
  nextIndex: number;
  /** True when a non-cycling job ran out of tokens before the duration ended. */
  exhausted: boolean;
  /** CPU ms the load generator itself used. */
  clientCpuMs: number;
  /** Open loop: requests that were due but never sent (the in-flight cap was reached until the end). */
  notSent?: number;
  /** Failed calls by error code (Connect code name, or HTTP status for ingest). */
  errorCodes?: Record<string, number>;
  /** callback jobs: which HTTP client sent them (undici when installed, else Node's fetch, itself undici). */
  client?: string;
  /** cast jobs with recordHearts: [heart id, intended start epoch ms, answered epoch ms, voter index] of every counted heart. */
  hearts?: Array<[string, number, number, number]>;
  /** votes jobs: answers by body (`1`, `2`, `0`, ...). */
  bodies?: Record<string, number>;
  /** pull jobs: lists and claims apart. */
  pull?: PullCounts;
  /** queue jobs: polls and acks apart. */
  queue?: QueueCounts;
}

/** What every job counts while it runs (each kind adds its own fields to the result). */
export interface LoadTally {
  /** Every response's or transport error's latency, ms. */
  latencies: number[];
  ok: number;
  unexpected: number;
  errors: number;
  sampleUnexpected?: string;
  errorCodes: Record<string, number>;
}

/** The part of a job's result every kind shares: its counts, rate and latency, and the client's CPU (`cpu`: process.cpuUsage since the start). */
export function toLoadResult(
  job: LoadJob,
  tally: LoadTally,
  run: { concurrency: number; elapsedMs: number; cpu: NodeJS.CpuUsage; nextIndex: number; exhausted: boolean },
): LoadResult {
  return {
    label: job.label,
    concurrency: run.concurrency,
    requests: tally.latencies.length,
    ok: tally.ok,
    unexpected: tally.unexpected,
    errors: tally.errors,
    ...(tally.sampleUnexpected === undefined ? {} : { sampleUnexpected: tally.sampleUnexpected }),
    elapsedMs: Math.round(run.elapsedMs),
    requestsPerSecond: Math.round((tally.ok / run.elapsedMs) * 1000 * 10) / 10,
    latency: summarize(tally.latencies),
    nextIndex: run.nextIndex,
    exhausted: run.exhausted,
    clientCpuMs: Math.round((run.cpu.user + run.cpu.system) / 1000),
    ...(Object.keys(tally.errorCodes).length > 0 ? { errorCodes: tally.errorCodes } : {}),
  };
}

/** The server_event_id prefix of each event type the bench sends. */
const EVENT_ID_PREFIX = { registered: "reg", qualified: "q", reversed: "rev" } as const;

/** The exact body bytes of ingest event `index`. */
export function buildIngestBody(spec: IngestBodySpec, index: number): string {
  const token = `${spec.tokenPrefix}${index}`;
  const event = spec.event ?? "registered";
  return JSON.stringify({
    event,
    token,
    server_id: spec.serverId,
    ...(event === "registered" ? { referee_identity: `referee-${token}` } : {}),
    server_event_id: `${EVENT_ID_PREFIX[event]}-${token}`,
    ts: 1_767_225_600,
    ...(spec.test ? { test: true } : {}),
  });
}

/** The X-Service-Signature header a caller sends for `body` at unix second `t`. */
export function signIngestBody(secret: string, t: number, body: string): string {
  const hex = createHmac("sha256", secret).update(`${t}.${body}`, "utf8").digest("hex");
  return `t=${t},v1=sha256=${hex}`;
}

/** A running load generator process. */
export interface LoadGenerator {
  /** The child's pid (for its CPU from /proc). */
  pid: number;
  run(job: LoadJob): Promise<LoadResult>;
  close(): Promise<void>;
}

interface ResultMessage {
  type: "result";
  id: number;
  result?: LoadResult;
  error?: string;
}

/** Forks the load generator child (bench/lib/loadgen-child.ts, run through tsx like the parent). */
export async function startLoadGenerator(): Promise<LoadGenerator> {
  const childPath = fileURLToPath(new URL("./loadgen-child.ts", import.meta.url));
  const execArgv = process.execArgv.some((arg) => arg.includes("tsx")) ? process.execArgv : [...process.execArgv, "--import", "tsx"];
  const child: ChildProcess = fork(childPath, [], { execArgv, stdio: ["ignore", "inherit", "inherit", "ipc"] });
  await new Promise<void>((resolve, reject) => {
    child.once("message", () => resolve());
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`load generator exited early (code ${code})`)));
  });
  let nextId = 0;
  const pending = new Map<number, { resolve: (r: LoadResult) => void; reject: (e: Error) => void }>();
  child.on("message", (message: ResultMessage) => {
    const waiter = pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id);
    if (message.result) waiter.resolve(message.result);
    else waiter.reject(new Error(message.error ?? "load generator failed"));
  });
  child.on("exit", (code) => {
    for (const waiter of pending.values()) waiter.reject(new Error(`load generator exited (code ${code})`));
    pending.clear();
  });
  return {
    pid: child.pid ?? -1,
    run(job) {
      const id = nextId++;
      return new Promise<LoadResult>((resolve, reject) => {
        pending.set(id, { resolve, reject });
        child.send({ type: "run", id, job });
      });
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      child.send({ type: "exit" });
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
