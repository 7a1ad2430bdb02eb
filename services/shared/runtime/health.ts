import { sendJson } from "./send-json.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "./log.js";
import type { Metrics } from "./metrics.js";

/**
 * A named readiness check: resolves when the dependency answers. `target` is the address it tries
 * (`host:port`, or a broker list; never credentials), named in its `down: ...` reason.
 */
export type ReadinessCheck = { name: string; check: () => Promise<void>; target?: string };

/** The longest one check may run before it counts as down. */
export const READINESS_TIMEOUT_MS = 2_000;
/**
 * How long /readyz waits for its checks before it answers: a check still running by then (a broker
 * that does not answer) is reported by its last known result and that result's age, so a probe with a
 * timeout shorter than READINESS_TIMEOUT_MS sees the reason, not a timeout of its own.
 */
export const READYZ_ANSWER_WITHIN_MS = 300;
/** Longest reason /readyz prints for one check. */
const MAX_REASON_CHARS = 300;
/** While /readyz is asked, each check also runs at this interval in the background, so its last result stays recent. */
export const READINESS_INTERVAL_MS = 5_000;
/**
 * A result older than this (the interval, the check's own bound, and a margin) no longer says anything about the
 * dependency: the check is stuck, and /readyz counts it as failing instead of reporting the old result.
 */
export const READINESS_MAX_RESULT_AGE_MS = READINESS_INTERVAL_MS + READINESS_TIMEOUT_MS + 1_000;
/** The background runs stop after this long without a probe; the next probe then waits for a fresh result, as the first does. */
const READINESS_IDLE_AFTER_MS = 60_000;

/** One check's result: `ok` or `down: <reason>`, and when it was found. */
interface CheckResult {
  status: string;
  atMs: number;
}

/**
 * One line, no secrets: a dependency's error as /readyz shows it. Prisma's multi-line messages
 * ("Invalid `prisma.server.findMany()` invocation: ... Message: `Can't reach database server at ...`") are
 * reduced to their message; a password in a URL is masked; the text is cut at MAX_REASON_CHARS.
 */
export function describeFailure(error: unknown): string {
  const raw = error instanceof Error ? error.message : String(error);
  const lines = raw
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "" && !/^Invalid `[^`]*` invocation:?$/.test(line));
  let text = lines.join("; ") || (error instanceof Error ? error.name : "unknown");
  const prismaMessage = /Message: `(.*)`$/.exec(text);
  if (prismaMessage?.[1]) text = prismaMessage[1];
  text = text.replace(/\b([a-z][a-z0-9+.-]*:\/\/[^\s/:@]*):[^\s/@]*@/gi, "$1:***@");
  return text.length > MAX_REASON_CHARS ? `${text.slice(0, MAX_REASON_CHARS - 1)}…` : text;
}

/** The words of a check's status for the log line of a change. */
const isDown = (status: string) => status !== "ok";

/**
 * A check run at most once at a time (probes arriving together share one run), remembering its last
 * result; while probed it also runs every READINESS_INTERVAL_MS. Once it has a result, /readyz answers
 * within `withinMs` from a fresh result or the last known one; a last result older than
 * READINESS_MAX_RESULT_AGE_MS counts as failing (`down: no result for <n> s ...`). The very first probe,
 * and the first after the background runs stopped for want of probes, waits for a fresh result (at most
 * READINESS_TIMEOUT_MS). A change between ok and down is logged once (`log`).
 */
function createCheckRunner({ name, check, target }: ReadinessCheck, nowMs: () => number, log: Logger | undefined) {
  let last: CheckResult | undefined;
  let running: Promise<CheckResult> | undefined;
  let reported: string | undefined;
  let lastAskedMs = Number.NEGATIVE_INFINITY;
  let background: NodeJS.Timeout | undefined;
  const at = target === undefined ? "" : ` (at ${target})`;

  /** Logs a change between ok and down once: the first down with its reason, the way back to ok. */
  const report = (status: string): void => {
    if (reported !== undefined && isDown(reported) === isDown(status)) return;
    if (isDown(status)) log?.warn({ check: name, target, status }, `readiness: ${name} ${status}`);
    else if (reported !== undefined) log?.info({ check: name, target }, `readiness: ${name} ok again`);
    reported = status;
  };
  const run = (): Promise<CheckResult> => {
    running ??= (async () => {
      let status: string;
      try {
        await withTimeout(check(), READINESS_TIMEOUT_MS);
        status = "ok";
      } catch (error) {
        // Failure policy: report the dependency as down, in one line with no secret (describeFailure), naming the address tried.
        status = `down: ${describeFailure(error)}${at}`;
      }
      last = { status, atMs: nowMs() };
      running = undefined;
      report(status);
      return last;
    })();
    return running;
  };
  /** Keeps the result recent while probes come; stops itself once they stop (a closed server's checks stop too). */
  const keepRunning = (): void => {
    if (background !== undefined) return;
    background = setInterval(() => {
      if (nowMs() - lastAskedMs > READINESS_IDLE_AFTER_MS) {
        clearInterval(background);
        background = undefined;
        return;
      }
      void run();
    }, READINESS_INTERVAL_MS);
    background.unref();
  };
  return {
    /** A fresh result when the check answers within `withinMs`, else the last known one while it is recent (none: wait for it). */
    async answer(withinMs: number): Promise<CheckResult> {
      const wasIdle = background === undefined;
      lastAskedMs = nowMs();
      keepRunning();
      const previous = last;
      if (previous === undefined || wasIdle) return run();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), withinMs);
      });
      const fresh = await Promise.race([run(), late]);
      clearTimeout(timer);
      if (fresh !== undefined) return fresh;
      const known = last ?? previous;
      const ageMs = nowMs() - known.atMs;
      if (ageMs <= READINESS_MAX_RESULT_AGE_MS) return known;
      // Failure policy: fail closed - a result older than the check's interval says nothing about the dependency now.
      const status = `down: no result for ${Math.round(ageMs / 1000)} s, the check has not answered${at} (last: ${known.status})`;
      report(status);
      return { status, atMs: known.atMs };
    },
  };
}

const defaultNowMs = () => Date.now();
/** One runner per check object, so handlers sharing a check (the gateway's public and ops ports) share its results. */
const RUNNERS = new WeakMap<ReadinessCheck, ReturnType<typeof createCheckRunner>>();
function runnerOf(check: ReadinessCheck, nowMs: () => number, log: Logger | undefined): ReturnType<typeof createCheckRunner> {
  let runner = RUNNERS.get(check);
  if (runner === undefined) {
    runner = createCheckRunner(check, nowMs, log);
    RUNNERS.set(check, runner);
  }
  return runner;
}

/**
 * Serves /healthz (process alive), /readyz (every dependency answers) and, when `metrics`
 * is given, /metrics (Prometheus). Returns false when the path is not one of them. A public
 * port mounts it without `metrics`: metrics are served on the ops port only.
 *
 * /readyz answers within `answerWithinMs` (READYZ_ANSWER_WITHIN_MS) once each check has a result:
 * `checks` holds each check's `ok` or `down: <reason>` (one line, naming the address tried), `checked_ms_ago`
 * how old each result is (0 = found for this request); a result older than READINESS_MAX_RESULT_AGE_MS
 * counts as down. With `log`, each check's change between ok and down is logged once. `nowMs` is the clock
 * of the results' ages (tests move it).
 */
export function createOpsHandler(opts: {
  checks: ReadinessCheck[];
  metrics?: Metrics;
  isDraining?: () => boolean;
  answerWithinMs?: number;
  log?: Logger;
  nowMs?: () => number;
}) {
  const nowMs = opts.nowMs ?? defaultNowMs;
  const runners = opts.checks.map((check) => ({ name: check.name, runner: runnerOf(check, nowMs, opts.log) }));
  const answerWithinMs = opts.answerWithinMs ?? READYZ_ANSWER_WITHIN_MS;
  return async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") return false;
    if (path === "/healthz") {
      sendJson(res, 200, { ok: true });
      return true;
    }
    if (path === "/readyz") {
      const askedAt = nowMs();
      const results = await Promise.all(runners.map(async ({ name, runner }) => [name, await runner.answer(answerWithinMs)] as const));
      const draining = opts.isDraining?.() ?? false;
      const ok = !draining && results.every(([, r]) => r.status === "ok");
      sendJson(res, ok ? 200 : 503, {
        ok,
        draining,
        checks: Object.fromEntries(results.map(([name, r]) => [name, r.status])),
        checked_ms_ago: Object.fromEntries(results.map(([name, r]) => [name, Math.max(0, askedAt - r.atMs)])),
      });
      return true;
    }
    if (path === "/metrics" && opts.metrics) {
      res.writeHead(200, { "content-type": opts.metrics.registry.contentType });
      res.end(await opts.metrics.registry.metrics());
      return true;
    }
    return false;
  };
}

/** Rejects with `timed out after <ms> ms` when `promise` has not settled within `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
