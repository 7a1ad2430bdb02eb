import { sendJson } from "./send-json.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Metrics } from "./metrics.js";

/** A named readiness check: resolves when the dependency answers. */
export type ReadinessCheck = { name: string; check: () => Promise<void> };

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

/** One check's result: `ok` or `down: <reason>`, and when it was found. */
interface CheckResult {
  status: string;
  atMs: number;
}

/**
 * One line, no secrets: a dependency's error as /readyz shows it. Prisma's multi-line messages
 * ("Invalid `prisma.$queryRaw()` invocation: ... Message: `Can't reach database server at ...`") are
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

/**
 * A check run at most once at a time (probes arriving together share one run), remembering its last
 * result: once it has one, /readyz answers within READYZ_ANSWER_WITHIN_MS from a fresh result or the
 * last known one; the very first probe waits for the first result (at most READINESS_TIMEOUT_MS).
 */
function createCheckRunner({ check }: ReadinessCheck, nowMs: () => number) {
  let last: CheckResult | undefined;
  let running: Promise<CheckResult> | undefined;
  const run = (): Promise<CheckResult> => {
    running ??= (async () => {
      let status: string;
      try {
        await withTimeout(check(), READINESS_TIMEOUT_MS);
        status = "ok";
      } catch (error) {
        // Failure policy: report the dependency as down, in one line with no secret (describeFailure).
        status = `down: ${describeFailure(error)}`;
      }
      last = { status, atMs: nowMs() };
      running = undefined;
      return last;
    })();
    return running;
  };
  return {
    /** A fresh result when the check answers within `withinMs`, else the last known one (none yet: wait for it). */
    async answer(withinMs: number): Promise<CheckResult> {
      const previous = last;
      if (previous === undefined) return run();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), withinMs);
      });
      const fresh = await Promise.race([run(), late]);
      clearTimeout(timer);
      return fresh ?? last ?? previous;
    },
  };
}

const nowMs = () => Date.now();
/** One runner per check object, so handlers sharing a check (the gateway's public and ops ports) share its results. */
const RUNNERS = new WeakMap<ReadinessCheck, ReturnType<typeof createCheckRunner>>();
function runnerOf(check: ReadinessCheck): ReturnType<typeof createCheckRunner> {
  let runner = RUNNERS.get(check);
  if (runner === undefined) {
    runner = createCheckRunner(check, nowMs);
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
 * `checks` holds each check's `ok` or `down: <reason>` (one line), `checked_ms_ago` how old each
 * result is (0 = found for this request).
 */
export function createOpsHandler(opts: { checks: ReadinessCheck[]; metrics?: Metrics; isDraining?: () => boolean; answerWithinMs?: number }) {
  const runners = opts.checks.map((check) => ({ name: check.name, runner: runnerOf(check) }));
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
