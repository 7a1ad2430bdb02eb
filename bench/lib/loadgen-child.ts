/**
 * The load generator's child process (see loadgen.ts): receives jobs over IPC and
 * answers each with a LoadResult. A job is signed ingest POSTs (keep-alive
 * node:http), CastHeart calls (Connect over HTTP/2, the product's own transport),
 * signed callback POSTs (the raw callback loop: undici request() through an Agent or
 * one Pool per origin, `RawClientShape`), or check/claim GETs (`votes`: keep-alive, or
 * a new connection with `Connection: close` per request as the reward plugins send them),
 * run as a closed loop of `concurrency` workers, or as an open loop at
 * `ratePerSecond` with at most `concurrency` in flight, where each latency counts
 * from the request's intended start (no coordinated omission); or game servers' plugins on the
 * signed pull API (`pull`: run-pull-plugins.ts, one plugin per server, closed loop); or reward plugins polling their
 * reward queues (`queue`: run-queue-plugins.ts, an open loop at the offered poll rate). Keeps its keep-alive
 * Agents and Connect clients between jobs with the same targets, so a warm-up job
 * leaves warm connections.
 */
import http from "node:http";
import { Agent, Pool, request } from "undici";
import { ConnectError, createClient, type Client } from "@connectrpc/connect";
import { Code } from "@connectrpc/connect";
import { HeartService } from "../../gen/proto/hearts/v1/hearts_pb.js";
import { signCallback } from "../../services/delivery/pipeline/send-callback.js";
import { periodOf } from "../../services/shared/values/period.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";
import { buildIngestBody, rawShapeLabel, signIngestBody, steamIdOf, toLoadResult, type LoadJob, type LoadResult, type RawClientShape } from "./loadgen.js";
import { runPullPlugins } from "./run-pull-plugins.js";
import { runQueuePlugins } from "./run-queue-plugins.js";

interface RunMessage {
  type: "run" | "exit";
  id: number;
  job: LoadJob;
}

const USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

const agents = new Map<string, http.Agent>();
function agentFor(url: string, sockets: number): http.Agent {
  const key = `${url}|${sockets}`;
  let agent = agents.get(key);
  if (!agent) {
    agent = new http.Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets });
    agents.set(key, agent);
  }
  return agent;
}

const heartClients = new Map<string, Client<typeof HeartService>>();
function heartClientFor(url: string, token: string): Client<typeof HeartService> {
  const key = `${url}|${token}`;
  let client = heartClients.get(key);
  if (!client) {
    client = createClient(HeartService, createServiceTransport(url, token));
    heartClients.set(key, client);
  }
  return client;
}

function post(url: URL, agentToUse: http.Agent, body: string, signature: string): Promise<{ status: number; text: string }> {
  const headers = { "content-type": "application/json", "content-length": Buffer.byteLength(body), "x-service-signature": signature };
  return send({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", agent: agentToUse, headers }, body);
}

/** One request over node:http; resolves with the status and the whole answer as text. */
function send(options: http.RequestOptions, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(options, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** A keep-alive POST for the raw callback loop, over undici (a dependency of this checkout). */
type RawPost = (url: URL, headers: Record<string, string>, body: string) => Promise<number>;
let rawPost: { key: string; name: string; post: RawPost; close(): Promise<void> } | undefined;
/** The raw loop's client for `shape` over `origins`; the previous shape's connections are closed first. */
async function rawPoster(shape: RawClientShape, origins: string[]): Promise<{ name: string; post: RawPost }> {
  const key = `${JSON.stringify(shape)}|${origins.join(",")}`;
  if (rawPost?.key === key) return rawPost;
  await rawPost?.close();
  const perOrigin = Math.max(1, Math.ceil(shape.connections / origins.length));
  const options = { connections: perOrigin, pipelining: shape.pipelining, keepAliveTimeout: 60_000 };
  if (shape.dispatcher === "agent") {
    const agent = new Agent(options);
    rawPost = {
      key,
      name: rawShapeLabel(shape),
      post: async (url, headers, body) => {
        const res = await request(url, { method: "POST", headers, body, dispatcher: agent });
        await res.body.dump();
        return res.statusCode;
      },
      close: () => agent.close(),
    };
  } else {
    const pools = new Map(origins.map((origin) => [origin, new Pool(origin, options)]));
    rawPost = {
      key,
      name: rawShapeLabel(shape),
      post: async (url, headers, body) => {
        const pool = pools.get(url.origin) as Pool;
        const res = await pool.request({ path: url.pathname, method: "POST", headers, body });
        await res.body.dump();
        return res.statusCode;
      },
      close: async () => {
        await Promise.all([...pools.values()].map((p) => p.close()));
      },
    };
  }
  return rawPost;
}

/** One reward queue call (a list GET, an ack POST with its JSON body) over the keep-alive agent. */
function queueRequest(url: URL, path: string, agentToUse: http.Agent, method: "GET" | "POST", body?: string): Promise<{ status: number; text: string }> {
  const headers: http.OutgoingHttpHeaders = body === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(body) };
  return send({ host: url.hostname, port: url.port, path, method, agent: agentToUse, headers }, body);
}

/** One check/claim GET; a new connection with `Connection: close` when `close`, else the keep-alive agent. */
function get(url: URL, path: string, agentToUse: http.Agent | false, close: boolean): Promise<{ status: number; text: string }> {
  return send({ host: url.hostname, port: url.port, path, method: "GET", agent: agentToUse, headers: close ? { connection: "close" } : {} });
}

/** The query of check/claim request number `n` about `steamId`: even n in rust-servers.net's form, odd n in the status/claim form. */
function votesPath(base: string, key: string, steamId: string, action: "check" | "claim", n: number): string {
  const k = encodeURIComponent(key);
  if (n % 2 === 0) {
    return action === "check"
      ? `${base}?object=votes&element=claim&key=${k}&steamid=${steamId}`
      : `${base}?action=post&object=votes&element=claim&key=${k}&steamid=${steamId}`;
  }
  return `${base}?action=${action === "check" ? "status" : "claim"}&key=${k}&steamid=${steamId}`;
}

/** What one request reported. */
type Outcome =
  | { kind: "ok"; heartId?: string; index?: number; body?: string }
  | { kind: "unexpected"; sample: string; code: string }
  | { kind: "error"; sample: string; code: string };

async function runJob(job: LoadJob): Promise<LoadResult> {
  const targets = (job.urls ?? [job.url]).map((u) => new URL(u));
  for (const url of targets) {
    if (url.hostname !== "127.0.0.1") throw new Error(`refusing to send load to ${url.hostname}: benchmarks only talk to 127.0.0.1`);
  }
  const kind = job.kind ?? "ingest";
  const spec = job.body;
  const cast = job.cast;
  if (kind === "cast" && !cast) throw new Error("cast job without a cast spec");
  const votes = job.votes;
  if (kind === "votes" && (!votes || votes.ids.length === 0)) throw new Error("votes job without ids");
  let next = kind === "cast" ? (cast?.start ?? 0) : kind === "votes" ? 0 : spec.start;
  let exhausted = false;
  let sent = 0;

  let taken = 0;
  const take = (): number | undefined => {
    if (job.maxRequests !== undefined && taken >= job.maxRequests) return undefined;
    taken++;
    if (kind === "votes" && votes) {
      if (next >= votes.ids.length) {
        if (!votes.cycle) {
          exhausted = true;
          return undefined;
        }
        next = 0;
      }
      return votes.ids[next++];
    }
    if (kind !== "ingest") return next++;
    if (next >= spec.end) {
      if (!spec.cycle) {
        exhausted = true;
        return undefined;
      }
      next = spec.start;
    }
    return next++;
  };

  /** Sends request `index` to the target chosen round-robin. */
  const poster = kind === "callback" && job.callback ? await rawPoster(job.callback.shape, [...new Set(targets.map((t) => t.origin))]) : undefined;
  const send = async (index: number): Promise<Outcome> => {
    const n = sent++;
    const target = targets[n % targets.length] as URL;
    if (kind === "votes" && votes) {
      const path = votesPath(target.pathname, votes.key, steamIdOf(index), votes.action, n);
      try {
        const res = await get(target, path, votes.connectionClose ? false : agentFor(target.href, job.concurrency), votes.connectionClose);
        const good = res.status === job.expectStatus && (job.expectBody === undefined || res.text === job.expectBody);
        return good
          ? { kind: "ok", body: res.text }
          : { kind: "unexpected", sample: `${res.status} ${res.text.slice(0, 300)}`, code: `${res.status} ${res.text.slice(0, 20)}` };
      } catch (error) {
        // Failure policy: count transport errors and keep going; the caller sees them in the result.
        return { kind: "error", sample: `transport error: ${(error as Error).message}`, code: "transport" };
      }
    }
    if (kind === "callback" && job.callback && poster) {
      const signed = signCallback({
        url: target.href,
        fields: {
          event: "heart.counted",
          serverId: job.callback.serverId,
          username: "bench_player",
          heartId: `raw-${index}`,
          period: periodOf(new Date()),
          streakDay: 3,
        },
        secretsNewestFirst: [job.callback.secret],
        standardWebhooks: false,
        t: Math.floor(Date.now() / 1000),
      });
      try {
        const status = await poster.post(target, signed.headers, signed.body);
        return status === job.expectStatus ? { kind: "ok" } : { kind: "unexpected", sample: `status ${status}`, code: String(status) };
      } catch (error) {
        // Failure policy: count transport errors and keep going; the caller sees them in the result.
        return { kind: "error", sample: `transport error: ${(error as Error).message}`, code: "transport" };
      }
    }
    if (kind === "cast" && cast) {
      const client = heartClientFor(target.origin, cast.token);
      try {
        const res = await client.castHeart(
          {
            serverId: cast.serverIds[index % cast.serverIds.length] ?? "",
            username: `player_${index % 100_000}`,
            voterIdentity: `${cast.voterPrefix}${index}`,
            // A distinct address per heart, and consecutive hearts in different /24s, so fraud scoring lets them count.
            ip: `10.${index & 255}.${(index >> 8) & 255}.${((index >> 16) & 255) + 1}`,
            userAgent: USER_AGENT,
            ...(cast.steamIds ? { steamId: steamIdOf(index) } : {}),
          },
          { timeoutMs: cast.timeoutMs },
        );
        if (res.counted) return { kind: "ok", heartId: res.heartId, index };
        return { kind: "unexpected", sample: `not counted: ${res.reason}`, code: `verdict_${res.verdict}` };
      } catch (error) {
        // Failure policy: count the failure by its Connect code and keep going; overload answers are data here.
        const connectError = ConnectError.from(error);
        return { kind: "error", sample: connectError.message.slice(0, 300), code: Code[connectError.code] ?? String(connectError.code) };
      }
    }
    const body = buildIngestBody(spec, index);
    const signature = signIngestBody(spec.secret, Math.floor(Date.now() / 1000), body);
    try {
      const res = await post(target, agentFor(target.href, job.concurrency), body, signature);
      if (res.status === job.expectStatus && res.text.includes(job.expectContains)) return { kind: "ok" };
      return { kind: "unexpected", sample: `${res.status} ${res.text.slice(0, 300)}`, code: String(res.status) };
    } catch (error) {
      // Failure policy: count transport errors and keep going; the caller sees them in the result.
      return { kind: "error", sample: `transport error: ${(error as Error).message}`, code: "transport" };
    }
  };

  const latencies: number[] = [];
  const hearts: Array<[string, number, number, number]> = [];
  const bodies: Record<string, number> = {};
  const errorCodes: Record<string, number> = {};
  let ok = 0;
  let unexpected = 0;
  let errors = 0;
  let sampleUnexpected: string | undefined;
  const record = (outcome: Outcome, intendedAt: number) => {
    latencies.push(performance.now() - intendedAt);
    if (outcome.kind === "ok") {
      ok++;
      if (cast?.recordHearts && outcome.heartId)
        hearts.push([outcome.heartId, performance.timeOrigin + intendedAt, performance.timeOrigin + performance.now(), outcome.index ?? -1]);
      if (outcome.body !== undefined) bodies[outcome.body] = (bodies[outcome.body] ?? 0) + 1;
      return;
    }
    if (outcome.kind === "unexpected") unexpected++;
    else errors++;
    errorCodes[outcome.code] = (errorCodes[outcome.code] ?? 0) + 1;
    sampleUnexpected ??= outcome.sample;
  };

  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const deadline = started + job.durationMs;
  let notSent = 0;

  if (job.ratePerSecond === undefined) {
    const worker = async () => {
      while (performance.now() < deadline) {
        const index = take();
        if (index === undefined) return;
        const at = performance.now();
        const outcome = await send(index);
        record(outcome, at);
        // A short pause after a transport error avoids a hot loop on a dead port.
        if (outcome.kind === "error" && (kind === "ingest" || kind === "votes")) await new Promise((r) => setTimeout(r, 10));
      }
    };
    await Promise.all(Array.from({ length: job.concurrency }, worker));
  } else {
    const intervalMs = 1000 / job.ratePerSecond;
    const total = Math.floor(job.durationMs / intervalMs);
    let issued = 0;
    let inFlight = 0;
    const pending = new Set<Promise<void>>();
    while (issued < total) {
      const now = performance.now();
      if (now >= deadline + 1_000) break;
      const due = Math.min(total, Math.floor((now - started) / intervalMs) + 1);
      while (issued < due && inFlight < job.concurrency) {
        const index = take();
        if (index === undefined) break;
        const intendedAt = started + issued * intervalMs;
        issued++;
        inFlight++;
        const p: Promise<void> = send(index).then((outcome) => {
          inFlight--;
          record(outcome, intendedAt);
          pending.delete(p);
        });
        pending.add(p);
      }
      if (exhausted) break;
      await new Promise((r) => setTimeout(r, 1));
    }
    notSent = total - issued;
    await Promise.all(pending);
  }
  const elapsedMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  return {
    ...toLoadResult(
      job,
      { latencies, ok, unexpected, errors, sampleUnexpected, errorCodes },
      { concurrency: job.concurrency, elapsedMs, cpu, nextIndex: next, exhausted },
    ),
    ...(job.ratePerSecond === undefined ? {} : { notSent }),
    ...(cast?.recordHearts ? { hearts } : {}),
    ...(poster ? { client: poster.name } : {}),
    ...(kind === "votes" ? { bodies } : {}),
  };
}

process.on("message", (message: RunMessage) => {
  if (message.type === "exit") {
    for (const agent of agents.values()) agent.destroy();
    process.exit(0);
  }
  const run =
    message.job.kind === "pull"
      ? runPullPlugins(message.job, { agentFor, post })
      : message.job.kind === "queue"
        ? runQueuePlugins(message.job, { agentFor, request: queueRequest })
        : runJob(message.job);
  run.then(
    (result) => process.send?.({ type: "result", id: message.id, result }),
    (error: unknown) => process.send?.({ type: "result", id: message.id, error: (error as Error).message }),
  );
});
process.send?.({ type: "ready" });
