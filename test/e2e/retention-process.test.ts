/**
 * Retention runs in the referral service process (services/referral-service/main.ts): started with it, a pass
 * removes a published outbox row past its limit and the process's /metrics shows the counts and ages.
 */
import test from "ava";
import { createTestDatabase } from "../../scripts/harness/db.js";
import { useProcesses } from "../../scripts/harness/processes.js";
import { newSecretsKey, startReferralServiceProcess } from "../../scripts/harness/e2e-support.js";
import { eventually } from "../helpers/eventually.js";
import { testOutboxRow } from "../helpers/outbox-row.js";

test("the referral service process runs retention: a published outbox row past RETENTION_PUBLISHED_OUTBOX_SECONDS is removed and /metrics counts it", async (t) => {
  t.timeout(120_000);
  const db = await createTestDatabase({ maxConnections: 2 });
  t.teardown(() => db.drop());
  const day = 86_400_000;
  const old = await db.prisma.outboxMessage.create({ data: testOutboxRow({ createdAt: new Date(Date.now() - day), publishedAt: new Date(Date.now() - day) }) });
  const unpublished = await db.prisma.outboxMessage.create({ data: testOutboxRow() });
  const group = useProcesses(t);
  const service = await startReferralServiceProcess(
    group,
    { databaseUrl: db.url, kafkaBrokers: "", secretsKey: newSecretsKey(), groupId: "unused" },
    {
      env: { RETENTION_PUBLISHED_OUTBOX_SECONDS: "60" },
    },
  );
  // The pass has ended once its log line is out (it paces itself between statements: RETENTION_DUTY_PERCENT).
  const metrics = await eventually(async () => {
    if (!/"msg":"retention pass"/.test(service.proc.stdout)) return false;
    const text = await (await fetch(`${service.opsUrl}/metrics`)).text();
    return /retention_rows_removed_total\{table="outbox",rule="published_outbox",service="referral-service"\} 1\n/.test(text) && text;
  });
  t.regex(metrics, /retention_oldest_row_age_seconds\{rule="published_outbox",service="referral-service"\} 0\n/, "no published row left");
  t.is(await db.prisma.outboxMessage.findUnique({ where: { id: old.id } }), null);
  t.truthy(await db.prisma.outboxMessage.findUnique({ where: { id: unpublished.id } }), "an unpublished row stays");
  t.regex(service.proc.stdout, /"msg":"retention pass"/);
});
