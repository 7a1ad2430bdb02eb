/**
 * The `pull` job of the load generator's child (loadgen-child.ts): game servers' plugins on the signed
 * pull API, one plugin per server as a game server runs one, as a closed loop for the job's duration.
 * Each plugin signs its requests with its server's pull secret (the ingest scheme: HMAC over
 * "<t>.<raw body>"). In `list` mode it walks its server's pending hearts page by page with the cursor
 * (`POST /api/pull/hearts`) and starts over after the last page; in `claim` mode it lists its first page
 * and claims the hearts listed (`POST /api/pull/claims` with their `heart_ids`), then lists again, as
 * a plugin catching up on a backlog does. Lists and claims are counted apart; a claim is expected to
 * answer `claimed` for every heart it names (one plugin per server: nothing else claims them).
 */
import type http from "node:http";
import { signIngestBody, toLoadResult, newTally, type LoadJob, type LoadResult } from "./loadgen.js";
import { summarize } from "./stats.js";

/** The child's keep-alive HTTP plumbing the plugins send through. */
export interface PullHttp {
  agentFor(url: string, sockets: number): http.Agent;
  post(url: URL, agent: http.Agent, body: string, signature: string): Promise<{ status: number; text: string }>;
}

/** A transport error or an unexpected answer waits this long before the plugin's next request (no hot loop on a dead port). */
const PAUSE_AFTER_FAILURE_MS = 10;

/** Runs the plugins of `job` (kind `pull`) until its duration ends (or maxRequests were sent); lists and claims apart in `pull`. */
export async function runPullPlugins(job: LoadJob, io: PullHttp): Promise<LoadResult> {
  const spec = job.pull;
  if (!spec || spec.servers.length === 0) throw new Error("pull job without servers");
  const listTargets = (job.urls ?? [job.url]).map((u) => new URL(u));
  const claimTargets = spec.claimUrls.map((u) => new URL(u));
  for (const url of [...listTargets, ...claimTargets]) {
    if (url.hostname !== "127.0.0.1") throw new Error(`refusing to send load to ${url.hostname}: benchmarks only talk to 127.0.0.1`);
  }
  const { tally, failed } = newTally();
  const listLatencies: number[] = [];
  const claimLatencies: number[] = [];
  let claimedHearts = 0;
  let emptyLists = 0;
  let sent = 0;

  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const deadline = started + job.durationMs;
  const more = () => performance.now() < deadline && (job.maxRequests === undefined || sent < job.maxRequests);

  /** One signed POST; its parsed answer when it is a 200 that `check` accepts, else undefined (counted as failed). */
  const call = async <T>(
    to: { url: URL; agent: http.Agent; secret: string },
    fields: Record<string, unknown>,
    what: "list" | "claim",
    check: (answer: T) => string | undefined,
  ) => {
    sent++;
    const body = JSON.stringify(fields);
    const at = performance.now();
    let res: { status: number; text: string };
    try {
      res = await io.post(to.url, to.agent, body, signIngestBody(to.secret, Math.floor(Date.now() / 1000), body));
    } catch (error) {
      // Failure policy: count the transport error and keep going; the caller sees it in the result.
      tally.latencies.push(performance.now() - at);
      failed("error", "transport", `${what}: transport error: ${(error as Error).message}`);
      return undefined;
    }
    const ms = performance.now() - at;
    tally.latencies.push(ms);
    (what === "list" ? listLatencies : claimLatencies).push(ms);
    if (res.status !== 200) {
      failed("unexpected", `${what} ${res.status}`, `${what}: ${res.status} ${res.text.slice(0, 300)}`);
      return undefined;
    }
    let answer: T;
    try {
      answer = JSON.parse(res.text) as T;
    } catch {
      // Failure policy: a 200 that is not JSON is an unexpected answer, counted like any other.
      failed("unexpected", `${what} not JSON`, `${what}: ${res.text.slice(0, 300)}`);
      return undefined;
    }
    const wrong = check(answer);
    if (wrong !== undefined) {
      failed("unexpected", `${what} ${wrong}`, `${what}: ${wrong}: ${res.text.slice(0, 300)}`);
      return undefined;
    }
    tally.ok++;
    return answer;
  };

  const plugin = async (server: { serverId: string; secret: string }, i: number) => {
    const listUrl = listTargets[i % listTargets.length] as URL;
    const claimUrl = claimTargets[i % claimTargets.length] ?? listUrl;
    const agent = io.agentFor(listUrl.origin, spec.servers.length);
    const list = { url: listUrl, agent, secret: server.secret };
    const claimAt = { url: claimUrl, agent, secret: server.secret };
    let cursor = "";
    while (more()) {
      const page = await call<{ hearts?: Array<{ heart_id: string }>; next_cursor?: string | null }>(
        list,
        { server_id: server.serverId, limit: spec.limit, ...(cursor === "" ? {} : { cursor }) },
        "list",
        (a) => (Array.isArray(a.hearts) ? undefined : "no hearts array"),
      );
      if (page === undefined) {
        await new Promise((r) => setTimeout(r, PAUSE_AFTER_FAILURE_MS));
        continue;
      }
      const ids = (page.hearts ?? []).map((h) => h.heart_id);
      if (ids.length === 0) emptyLists++;
      if (spec.mode === "list") {
        cursor = page.next_cursor ?? "";
        continue;
      }
      if (ids.length === 0 || !more()) continue;
      const claim = await call<{ results?: Array<{ status: string }> }>(claimAt, { server_id: server.serverId, heart_ids: ids }, "claim", (a) => {
        const notClaimed = (a.results ?? []).filter((r) => r.status !== "claimed").length;
        return a.results?.length === ids.length && notClaimed === 0 ? undefined : `${notClaimed} of ${ids.length} not claimed`;
      });
      if (claim === undefined) await new Promise((r) => setTimeout(r, PAUSE_AFTER_FAILURE_MS));
      else claimedHearts += ids.length;
    }
  };
  await Promise.all(spec.servers.map(plugin));

  const elapsedMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const run = { concurrency: spec.servers.length, elapsedMs, cpu, nextIndex: 0, exhausted: false };
  return {
    ...toLoadResult(job, tally, run),
    pull: {
      lists: listLatencies.length,
      claims: claimLatencies.length,
      claimedHearts,
      emptyLists,
      listLatency: summarize(listLatencies),
      claimLatency: summarize(claimLatencies),
    },
  };
}
