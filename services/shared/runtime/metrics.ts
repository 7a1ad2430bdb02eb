import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** One Prometheus registry per process, with the process's default metrics. */
export function createMetrics(service: string) {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: "requests_total",
    help: "Requests handled, by route/procedure and outcome code.",
    labelNames: ["route", "code"] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: "request_duration_seconds",
    help: "Request latency in seconds, by route/procedure.",
    labelNames: ["route"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  return {
    registry,
    /** Records one request. */
    observe(route: string, code: string | number, seconds: number) {
      requests.inc({ route, code: String(code) });
      latency.observe({ route }, seconds);
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
