/**
 * ApplyEvent in process, without the gateway: the production referral service (the tests' harness,
 * scripts/harness/referral-harness.ts: a database cloned from the migrated template, the service on
 * HTTP/2, real Connect clients), driven by N callers in a closed loop, each sending `registered` events
 * through fresh clicks. Reports per phase: events/s, latency p50/p99, the process's CPU ms per event and the
 * database's transactions per event (pg_stat_database), for each concurrency in turn. Needs the variables the
 * test runner sets (TEST_PG_ADMIN_URL, TEST_TEMPLATE_DB: a migrated template, e.g. the one `npm test` leaves).
 * The machine is shared: compare variants run alternately, minutes apart at most.
 *
 *   TEST_PG_ADMIN_URL=$DATABASE_URL TEST_TEMPLATE_DB=tpl_x npx tsx bench/apply-event-rounds.ts   # c=8 then c=32, 4 s each
 *   ROUNDS_CONCURRENCY=8 ROUNDS_MEASURE_MS=6000 npx tsx bench/apply-event-rounds.ts
 *   ROUNDS_COALESCE=4,2 ROUNDS_IN_FLIGHT=2 npx tsx bench/apply-event-rounds.ts   # group-commit settings to try
 *
 * Prints one JSON line per concurrency to stdout.
 */
import { randomInt, randomUUID } from "node:crypto";
import { applyEvent, createReferralServer, startHarness } from "../scripts/harness/referral-harness.js";
import type { ApplyEventBatchOptions } from "../services/referral/apply-event.js";
import { Prisma } from "../gen/prisma/client.js";
import { runSql } from "../services/shared/adapters/sql/executor.js";

const concurrencies = (process.env.ROUNDS_CONCURRENCY ?? "8,32").split(",").map(Number);
const measureMs = Number(process.env.ROUNDS_MEASURE_MS ?? 4_000);
const warmupMs = Number(process.env.ROUNDS_WARMUP_MS ?? 1_000);
const batch: ApplyEventBatchOptions = {};
if (process.env.ROUNDS_COALESCE) {
  const [minItems, maxWaitMs] = process.env.ROUNDS_COALESCE.split(",").map(Number);
  batch.coalesce = { minItems: minItems!, maxWaitMs: maxWaitMs! };
}
if (process.env.ROUNDS_IN_FLIGHT) batch.maxInFlight = Number(process.env.ROUNDS_IN_FLIGHT);

const h = await startHarness({ maxConnections: 10, ...(Object.keys(batch).length > 0 ? { applyEventBatch: batch } : {}) });
try {
  const { serverId } = await createReferralServer(h);
  const dbName = new URL(h.db.url).pathname.slice(1);
  const commits = async () => {
    const [row] = await runSql<{ n: bigint }>(h.db.prisma, Prisma.sql`SELECT xact_commit AS n FROM pg_stat_database WHERE datname = ${dbName}`);
    return Number(row?.n ?? 0);
  };
  // Clicks made ahead, so the measured loop is ApplyEvent alone; each from its own address (one address for thousands of
  // clicks is no real traffic, and where the server's review mode is not 'off' statement 1's anti-abuse facts count them).
  const clickToken = async () => {
    const ip = `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;
    return (await h.referral.recordClick({ serverId, referrerIdentity: `referrer-${randomUUID()}`, ip, userAgent: `bench ${randomUUID()}` })).token;
  };
  const tokens: string[] = [];
  const makeClicks = async (n: number) => {
    for (let i = 0; i < n; i += 32) {
      tokens.push(...(await Promise.all(Array.from({ length: Math.min(32, n - i) }, clickToken))));
    }
  };
  const clicksAhead = Number(process.env.ROUNDS_CLICKS ?? 6_000);

  const runFor = async (concurrency: number, ms: number) => {
    const latencies: number[] = [];
    const until = performance.now() + ms;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < until) {
          const token = tokens.pop();
          if (token === undefined) throw new Error("out of clicks: raise the number made ahead");
          const start = performance.now();
          await applyEvent(h, { serverId, event: "registered", token, serverEventId: randomUUID(), refereeIdentity: `referee-${randomUUID()}` });
          latencies.push(performance.now() - start);
        }
      }),
    );
    return latencies;
  };

  for (const concurrency of concurrencies) {
    if (tokens.length < clicksAhead) await makeClicks(clicksAhead - tokens.length);
    await runFor(concurrency, warmupMs);
    const commitsBefore = await commits();
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const latencies = await runFor(concurrency, measureMs);
    const elapsedMs = performance.now() - started;
    const cpu = process.cpuUsage(cpuBefore);
    const transactions = (await commits()) - commitsBefore - 1;
    latencies.sort((a, b) => a - b);
    const at = (q: number) => Number((latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0).toFixed(2));
    console.log(
      JSON.stringify({
        concurrency,
        events: latencies.length,
        eventsPerSecond: Math.round((latencies.length / elapsedMs) * 1000),
        p50Ms: at(0.5),
        p99Ms: at(0.99),
        cpuMsPerEvent: Number(((cpu.user + cpu.system) / 1000 / latencies.length).toFixed(3)),
        transactionsPerEvent: Number((transactions / latencies.length).toFixed(3)),
        ...batch,
      }),
    );
  }
} finally {
  await h.close();
}
