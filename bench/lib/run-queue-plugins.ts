/**
 * The `queue` job of the load generator's child (loadgen-child.ts): the reward plugins of many game servers polling
 * their reward queues (`GET /api/rewards/queue?key=...&online=...`, docs/reward-queue.md), as an OPEN loop at the
 * job's rate (QUEUE_SERVERS plugins each polling every 30 s offer QUEUE_SERVERS / 30 polls a second, whatever the
 * service answers), over keep-alive connections, each poll with the next server's key in turn. In `pollAck` mode a
 * poll that lists entries is followed by the acknowledgement of their ids (`POST /api/rewards/queue/ack`), as a
 * plugin that ran them does. A poll's latency counts from its intended start (no coordinated omission); polls and
 * acks are also timed apart. A poll is expected to answer 200 with an `entries` array, an ack to acknowledge every
 * id it names (one plugin per server: nothing else acknowledges them).
 */
import type http from "node:http";
import { toLoadResult, type LoadJob, type LoadResult, type LoadTally } from "./loadgen.js";
import { summarize } from "./stats.js";

/** The child's keep-alive HTTP plumbing the plugins send through. */
export interface QueueHttp {
  agentFor(url: string, sockets: number): http.Agent;
  request(url: URL, path: string, agent: http.Agent, method: "GET" | "POST", body?: string): Promise<{ status: number; text: string }>;
}

/** Runs the polls of `job` (kind `queue`) until its duration ends; polls and acks apart in `queue`. */
export async function runQueuePlugins(job: LoadJob, io: QueueHttp): Promise<LoadResult> {
  const spec = job.queue;
  if (!spec || spec.keys.length === 0) throw new Error("queue job without keys");
  if (job.ratePerSecond === undefined) throw new Error("queue job without a rate: plugins poll on a schedule (open loop)");
  const targets = (job.urls ?? [job.url]).map((u) => new URL(u));
  for (const url of targets) if (url.hostname !== "127.0.0.1") throw new Error(`refusing to send load to ${url.hostname}: benchmarks only talk to 127.0.0.1`);
  const tally: LoadTally = { latencies: [], ok: 0, unexpected: 0, errors: 0, errorCodes: {} };
  const pollLatencies: number[] = [];
  const ackLatencies: number[] = [];
  let entriesListed = 0;
  let entriesAcked = 0;
  let emptyPolls = 0;
  let acks = 0;
  const failed = (kind: "unexpected" | "error", code: string, sample: string) => {
    if (kind === "unexpected") tally.unexpected++;
    else tally.errors++;
    tally.errorCodes[code] = (tally.errorCodes[code] ?? 0) + 1;
    tally.sampleUnexpected ??= sample;
  };
  const online = spec.online.length === 0 ? "" : `&online=${spec.online.map(encodeURIComponent).join(",")}`;

  /** One plugin's turn: list (and, in pollAck mode, acknowledge what was listed); false when something failed. */
  const turn = async (n: number): Promise<boolean> => {
    const key = encodeURIComponent(spec.keys[n % spec.keys.length] as string);
    const url = targets[n % targets.length] as URL;
    const agent = io.agentFor(url.origin, job.concurrency);
    let at = performance.now();
    let res: { status: number; text: string };
    try {
      res = await io.request(url, `${spec.listPath}?key=${key}${online}`, agent, "GET");
    } catch (error) {
      // Failure policy: count the transport error and keep going; the caller sees it in the result.
      failed("error", "transport", `list: transport error: ${(error as Error).message}`);
      return false;
    }
    pollLatencies.push(performance.now() - at);
    let listed: { entries?: Array<{ id: string }> };
    try {
      listed = JSON.parse(res.text) as typeof listed;
    } catch {
      // Failure policy: a body that is not JSON is an unexpected answer, counted like any other.
      failed("unexpected", `list ${res.status}`, `list: ${res.status} ${res.text.slice(0, 300)}`);
      return false;
    }
    if (res.status !== 200 || !Array.isArray(listed.entries)) {
      failed("unexpected", `list ${res.status}`, `list: ${res.status} ${res.text.slice(0, 300)}`);
      return false;
    }
    const ids = listed.entries.map((e) => e.id);
    entriesListed += ids.length;
    if (ids.length === 0) emptyPolls++;
    if (spec.mode === "poll" || ids.length === 0) return true;
    at = performance.now();
    try {
      res = await io.request(url, `${spec.ackPath}?key=${key}`, agent, "POST", JSON.stringify({ ids }));
    } catch (error) {
      // Failure policy: as the list's.
      failed("error", "transport", `ack: transport error: ${(error as Error).message}`);
      return false;
    }
    ackLatencies.push(performance.now() - at);
    acks++;
    const acked = res.status === 200 ? ((JSON.parse(res.text) as { acked?: string[] }).acked ?? []) : [];
    if (acked.length !== ids.length) {
      failed("unexpected", `ack ${res.status}`, `ack: ${acked.length} of ${ids.length} acknowledged: ${res.text.slice(0, 300)}`);
      return false;
    }
    entriesAcked += acked.length;
    return true;
  };

  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const deadline = started + job.durationMs;
  const intervalMs = 1000 / job.ratePerSecond;
  const total = Math.floor(job.durationMs / intervalMs);
  let issued = 0;
  let inFlight = 0;
  const pending = new Set<Promise<void>>();
  const offset = spec.startAt ?? 0;
  while (issued < total && performance.now() < deadline + 1_000) {
    const due = Math.min(total, Math.floor((performance.now() - started) / intervalMs) + 1);
    while (issued < due && inFlight < job.concurrency) {
      const intendedAt = started + issued * intervalMs;
      const n = offset + issued;
      issued++;
      inFlight++;
      const p: Promise<void> = turn(n).then((ok) => {
        inFlight--;
        tally.latencies.push(performance.now() - intendedAt);
        if (ok) tally.ok++;
        pending.delete(p);
      });
      pending.add(p);
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  const notSent = total - issued;
  await Promise.all(pending);
  const elapsedMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  return {
    ...toLoadResult(job, tally, { concurrency: job.concurrency, elapsedMs, cpu, nextIndex: offset + issued, exhausted: false }),
    notSent,
    queue: {
      polls: pollLatencies.length,
      acks,
      entriesListed,
      entriesAcked,
      emptyPolls,
      pollLatency: summarize(pollLatencies),
      ackLatency: summarize(ackLatencies),
    },
  };
}
