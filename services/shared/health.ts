import { sendJson } from "./send-json.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Metrics } from "./metrics.js";

/** A named readiness check: resolves when the dependency answers. */
export type ReadinessCheck = { name: string; check: () => Promise<void> };

const READINESS_TIMEOUT_MS = 2_000;

/**
 * Serves /healthz (process alive), /readyz (every dependency answers) and, when `metrics`
 * is given, /metrics (Prometheus). Returns false when the path is not one of them. A public
 * port mounts it without `metrics`: metrics are served on the ops port only.
 */
export function createOpsHandler(opts: { checks: ReadinessCheck[]; metrics?: Metrics; isDraining?: () => boolean }) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") return false;
    if (path === "/healthz") {
      sendJson(res, 200, { ok: true });
      return true;
    }
    if (path === "/readyz") {
      const results = await Promise.all(
        opts.checks.map(async ({ name, check }) => {
          try {
            await withTimeout(check(), READINESS_TIMEOUT_MS);
            return [name, "ok"] as const;
          } catch (error) {
            // Failure policy: report the dependency as down; the message names no secret.
            return [name, `down: ${(error as Error).message ?? "unknown"}`] as const;
          }
        }),
      );
      const draining = opts.isDraining?.() ?? false;
      const ok = !draining && results.every(([, status]) => status === "ok");
      sendJson(res, ok ? 200 : 503, { ok, draining, checks: Object.fromEntries(results) });
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
