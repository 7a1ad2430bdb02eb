/**
 * /readyz answers fast while a dependency hangs (Kafka down): within READYZ_ANSWER_WITHIN_MS, from the
 * last known result and its age, so a probe with a 1 s timeout sees the reason, not a timeout of its
 * own; and a dependency's error is shown in one line without secrets (Prisma's multi-line message).
 */
import anyTest from "ava";
import { createKafkaBus } from "../../services/shared/kafka-bus.js";
import { createPrisma, pingDatabase } from "../../services/shared/db.js";
import { describeFailure, READINESS_TIMEOUT_MS, READYZ_ANSWER_WITHIN_MS } from "../../services/shared/health.js";
import { createLogger } from "../../services/shared/log.js";
import { createMetrics } from "../../services/shared/metrics.js";
import { createOpsServer } from "../../services/shared/ops-server.js";
import { readinessChecks } from "../../services/shared/readiness.js";
import { createTestDatabase } from "../helpers/db.js";

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

test("relay/delivery shape: Kafka unreachable, /readyz still answers a 1 s probe with the reason", async (t) => {
  const log = createLogger("readyz-fast", "silent");
  const bus = createKafkaBus({ brokers: ["127.0.0.1:9"], clientId: "readyz-fast", log });
  // A database of the test's own (the runner's cluster; DATABASE_URL is set only when the caller gave one).
  const db = await createTestDatabase({ maxConnections: 1 });
  t.teardown(() => db.drop());
  const prisma = createPrisma(db.url, { maxConnections: 1 });
  await pingDatabase(prisma);
  const ops = createOpsServer({ checks: readinessChecks({ prisma, bus }), metrics: createMetrics("readyz-fast-kafka") });
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
      t.regex(later.body.checks.kafka ?? "", /^down: \S/);
    }
  } finally {
    await ops.close();
    await bus.close().catch(() => undefined);
    await prisma.$disconnect();
  }
});

test("the database down: /readyz shows Prisma's error in one line, without the password", async (t) => {
  const prisma = createPrisma("postgresql://referral:s3cret-pass-word@127.0.0.1:9/referral", { maxConnections: 1 });
  const ops = createOpsServer({ checks: readinessChecks({ prisma }), metrics: createMetrics("readyz-fast-db") });
  const port = await ops.listen(0);
  try {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`);
    t.is(res.status, 503);
    const reason = ((await res.json()) as Readyz["body"]).checks.database ?? "";
    t.regex(reason, /^down: /);
    t.false(/[\r\n]/.test(reason), `one line: ${JSON.stringify(reason)}`);
    t.false(reason.includes("s3cret-pass-word"));
    t.false(reason.includes("invocation"), "Prisma's 'Invalid ... invocation' preamble is dropped");
    t.regex(reason, /reach database server/);
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
