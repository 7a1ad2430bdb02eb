/**
 * /readyz answers fast while a dependency hangs (Kafka down): within READYZ_ANSWER_WITHIN_MS, from the
 * last known result and its age, so a probe with a 1 s timeout sees the reason, not a timeout of its
 * own; a last result older than the check's interval (READINESS_MAX_RESULT_AGE_MS) counts as failing
 * (a frozen broker never looks healthy from an old `ok`), and each change is logged once; a
 * dependency's error is shown in one line without secrets (Prisma's multi-line message), naming the
 * address tried.
 */
import anyTest from "ava";
import { createKafkaBus } from "../../services/shared/adapters/kafka-bus.js";
import { createPrisma, pingDatabase } from "../../services/shared/adapters/db.js";
import { describeFailure, READINESS_MAX_RESULT_AGE_MS, READINESS_TIMEOUT_MS, READYZ_ANSWER_WITHIN_MS } from "../../services/shared/runtime/health.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createMetrics } from "../../services/shared/runtime/metrics.js";
import { createOpsServer } from "../../services/shared/runtime/ops-server.js";
import { readinessChecks } from "../../services/shared/adapters/readiness.js";
import { createTestDatabase } from "../../scripts/harness/db.js";
import { eventually } from "../helpers/eventually.js";
import { captureLog } from "./gateway-stack.js";

// One test at a time: Prisma's first query compiles its engine and holds the event loop meanwhile.
const test = anyTest.serial;

interface Readyz {
  status: number;
  body: { ok: boolean; checks: Record<string, string>; checked_ms_ago: Record<string, number> };
  tookMs: number;
}

/** GET /readyz like a probe with a 1 s timeout (AbortSignal.timeout throws when it is exceeded). */
async function probe(port: number): Promise<Readyz> {
  const started = Date.now();
  const res = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1_000) });
  return { status: res.status, body: (await res.json()) as Readyz["body"], tookMs: Date.now() - started };
}

test("with a check that never answers, /readyz reports its last known reason and age within a 1 s probe timeout", async (t) => {
  t.true(READYZ_ANSWER_WITHIN_MS < 1_000 && READYZ_ANSWER_WITHIN_MS < READINESS_TIMEOUT_MS);
  const ops = createOpsServer({
    checks: [
      { name: "database", check: async () => undefined },
      { name: "kafka", check: () => new Promise<void>(() => undefined) },
    ],
    metrics: createMetrics("readyz-fast"),
  });
  const port = await ops.listen(0);
  try {
    // The first probe has no earlier result to report: it waits for the check to give up.
    const first = await fetch(`http://127.0.0.1:${port}/readyz`);
    t.is(first.status, 503);
    t.is(((await first.json()) as Readyz["body"]).checks.kafka, `down: timed out after ${READINESS_TIMEOUT_MS} ms`);
    // From then on every probe answers at once with the last known reason and its age, while the check runs again.
    await new Promise((resolve) => setTimeout(resolve, 400));
    for (let i = 0; i < 3; i++) {
      const later = await probe(port);
      t.is(later.status, 503);
      t.true(later.tookMs < 1_000, `answered in ${later.tookMs} ms`);
      t.is(later.body.checks.kafka, `down: timed out after ${READINESS_TIMEOUT_MS} ms`);
      t.true((later.body.checked_ms_ago.kafka ?? -1) >= READYZ_ANSWER_WITHIN_MS, `the result's age is reported: ${later.body.checked_ms_ago.kafka}`);
      t.is(later.body.checked_ms_ago.database, 0, "a check that answers is fresh");
    }
  } finally {
    await ops.close();
  }
});

test("a check frozen after an ok: its 34 s old ok counts as failing, naming the address; the change is logged once, and the way back", async (t) => {
  let clockMs = 1_000_000;
  let frozen = false;
  const captured = captureLog("debug");
  const ops = createOpsServer({
    checks: [{ name: "kafka", target: "127.0.0.1:9092", check: () => (frozen ? new Promise<void>(() => undefined) : Promise.resolve()) }],
    metrics: createMetrics("readyz-frozen"),
    log: captured.log,
    nowMs: () => clockMs,
  });
  const port = await ops.listen(0);
  const readinessLines = () => captured.lines.filter((line) => String(line.msg).startsWith("readiness: kafka"));
  try {
    const first = await probe(port);
    t.is(first.status, 200);
    t.is(first.body.checks.kafka, "ok");
    // The broker freezes; the next probe comes 34 s later (the clock moves; nothing sleeps).
    frozen = true;
    clockMs += 34_000;
    t.true(34_000 > READINESS_MAX_RESULT_AGE_MS);
    const stale = await probe(port);
    t.is(stale.status, 503, JSON.stringify(stale.body));
    t.regex(stale.body.checks.kafka ?? "", /^down: no result for 34 s, the check has not answered \(at 127\.0\.0\.1:9092\) \(last: ok\)$/);
    t.true(stale.tookMs < 1_000, `answered in ${stale.tookMs} ms`);
    t.true((stale.body.checked_ms_ago.kafka ?? 0) >= 34_000);
    const again = await probe(port);
    t.is(again.status, 503);
    t.is(readinessLines().length, 1, "the change to down is logged once");
    t.like(readinessLines()[0], { level: 40, check: "kafka", target: "127.0.0.1:9092" });
    // The broker answers again: ready, and the way back is logged once.
    frozen = false;
    await eventually(async () => (await probe(port)).status === 200, { timeoutMs: 10_000 });
    t.deepEqual(
      readinessLines().map((line) => [line.level, line.msg]),
      [
        [40, readinessLines()[0]?.msg],
        [30, "readiness: kafka ok again"],
      ],
    );
  } finally {
    await ops.close();
  }
});

test("relay/delivery shape: Kafka unreachable, /readyz still answers a 1 s probe with the reason", async (t) => {
  const log = createLogger("readyz-fast", "silent");
  const bus = createKafkaBus({ brokers: ["127.0.0.1:9"], clientId: "readyz-fast", log });
  // A database of the test's own (the runner's cluster; DATABASE_URL is set only when the caller gave one).
  const db = await createTestDatabase({ maxConnections: 1 });
  t.teardown(() => db.drop());
  const prisma = createPrisma(db.url, { maxConnections: 1 });
  await pingDatabase(prisma);
  const ops = createOpsServer({ checks: readinessChecks({ prisma, bus, brokers: ["127.0.0.1:9"] }), metrics: createMetrics("readyz-fast-kafka") });
  const port = await ops.listen(0);
  try {
    // The first probe finds the first result (at most READINESS_TIMEOUT_MS); every later one answers fast with the reason.
    const first = await fetch(`http://127.0.0.1:${port}/readyz`);
    t.is(first.status, 503);
    t.regex(((await first.json()) as Readyz["body"]).checks.kafka ?? "", /^down: /);
    for (let i = 0; i < 3; i++) {
      const later = await probe(port);
      t.is(later.status, 503);
      t.true(later.tookMs < 1_000, `answered in ${later.tookMs} ms`);
      t.regex(later.body.checks.kafka ?? "", /^down: \S.* \(at 127\.0\.0\.1:9\)$/, "the reason names the broker tried");
    }
  } finally {
    await ops.close();
    await bus.close().catch(() => undefined);
    await prisma.$disconnect();
  }
});

test("the database down: /readyz shows the driver's error in one line, without the password", async (t) => {
  const url = "postgresql://referral:s3cret-pass-word@127.0.0.1:9/referral";
  const prisma = createPrisma(url, { maxConnections: 1 });
  const ops = createOpsServer({ checks: readinessChecks({ prisma, databaseUrl: url }), metrics: createMetrics("readyz-fast-db") });
  const port = await ops.listen(0);
  try {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`);
    t.is(res.status, 503);
    const reason = ((await res.json()) as Readyz["body"]).checks.database ?? "";
    t.regex(reason, /^down: /);
    t.false(/[\r\n]/.test(reason), `one line: ${JSON.stringify(reason)}`);
    t.false(reason.includes("s3cret-pass-word"));
    // The ping runs on the one executor (node-postgres), so the cause is the driver's, not Prisma's wrapped text.
    t.regex(reason, /ECONNREFUSED/);
    t.regex(reason, /\(at 127\.0\.0\.1:9\)$/, "names the address tried, host:port only");
    t.false(reason.includes("referral:"), "never the user name");
  } finally {
    await ops.close();
    await prisma.$disconnect();
  }
});

test("describeFailure: one line, URL passwords masked, bounded", (t) => {
  t.is(
    describeFailure(
      new Error("\nInvalid `prisma.$queryRaw()` invocation:\n\n\nRaw query failed. Code: `N/A`. Message: `Can't reach database server at 127.0.0.1:9`"),
    ),
    "Can't reach database server at 127.0.0.1:9",
  );
  t.is(describeFailure(new Error("connect to postgresql://u:pw@db:5432/x failed\n  at line")), "connect to postgresql://u:***@db:5432/x failed; at line");
  t.true(describeFailure(new Error("x".repeat(5_000))).length <= 300);
});
