/**
 * The load generator's child process (see loadgen.ts): receives jobs over IPC,
 * runs each as a closed loop of `concurrency` keep-alive workers for
 * `durationMs`, and answers with a LoadResult. Keeps its keep-alive Agent between
 * jobs with the same URL and concurrency, so a warm-up job leaves warm sockets.
 */
import http from "node:http";
import { buildIngestBody, signIngestBody, type LoadJob, type LoadResult } from "./loadgen.js";
import { summarize } from "./stats.js";

interface RunMessage {
  type: "run" | "exit";
  id: number;
  job: LoadJob;
}

let agent: http.Agent | undefined;
let agentKey = "";

function agentFor(job: LoadJob): http.Agent {
  const key = `${job.url}|${job.concurrency}`;
  if (agent && agentKey === key) return agent;
  agent?.destroy();
  agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency, maxFreeSockets: job.concurrency });
  agentKey = key;
  return agent;
}

function post(url: URL, agentToUse: http.Agent, body: string, signature: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        agent: agentToUse,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), "x-service-signature": signature },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

async function runJob(job: LoadJob): Promise<LoadResult> {
  const url = new URL(job.url);
  if (url.hostname !== "127.0.0.1") throw new Error(`refusing to send load to ${url.hostname}: benchmarks only talk to 127.0.0.1`);
  const spec = job.body;
  const agentToUse = agentFor(job);
  const latencies: number[] = [];
  let next = spec.start;
  let exhausted = false;
  let ok = 0;
  let unexpected = 0;
  let errors = 0;
  let sampleUnexpected: string | undefined;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const deadline = started + job.durationMs;

  const take = (): number | undefined => {
    if (next >= spec.end) {
      if (!spec.cycle) {
        exhausted = true;
        return undefined;
      }
      next = spec.start;
    }
    return next++;
  };

  const worker = async () => {
    while (performance.now() < deadline) {
      const index = take();
      if (index === undefined) return;
      const body = buildIngestBody(spec, index);
      const signature = signIngestBody(spec.secret, Math.floor(Date.now() / 1000), body);
      const sent = performance.now();
      try {
        const res = await post(url, agentToUse, body, signature);
        latencies.push(performance.now() - sent);
        if (res.status === job.expectStatus && res.text.includes(job.expectContains)) ok++;
        else {
          unexpected++;
          sampleUnexpected ??= `${res.status} ${res.text.slice(0, 300)}`;
        }
      } catch (error) {
        // Failure policy: count transport errors and keep going; a short pause avoids a hot loop on a dead port.
        errors++;
        sampleUnexpected ??= `transport error: ${(error as Error).message}`;
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  };
  await Promise.all(Array.from({ length: job.concurrency }, worker));
  const elapsedMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  return {
    label: job.label,
    concurrency: job.concurrency,
    requests: latencies.length,
    ok,
    unexpected,
    errors,
    ...(sampleUnexpected === undefined ? {} : { sampleUnexpected }),
    elapsedMs: Math.round(elapsedMs),
    requestsPerSecond: Math.round((ok / elapsedMs) * 1000 * 10) / 10,
    latency: summarize(latencies),
    nextIndex: next,
    exhausted,
    clientCpuMs: Math.round((cpu.user + cpu.system) / 1000),
  };
}

process.on("message", (message: RunMessage) => {
  if (message.type === "exit") {
    agent?.destroy();
    process.exit(0);
  }
  runJob(message.job).then(
    (result) => process.send?.({ type: "result", id: message.id, result }),
    (error: unknown) => process.send?.({ type: "result", id: message.id, error: (error as Error).message }),
  );
});
process.send?.({ type: "ready" });
