/**
 * ApplyEvent's round transaction (services/referral/apply-event.ts on runSqlTransaction, services/shared/adapters/sql/executor.ts):
 * a round that gets no pooled connection within APPLY_EVENT_TRANSACTION_LIMITS_MS.maxWait answers its events
 * overloaded (resource_exhausted, retryable) and writes nothing, as it did as a Prisma interactive transaction
 * (P2028); the same event applies once a connection is free.
 */
import anyTest, { type TestFn } from "ava";
import { APPLY_EVENT_TRANSACTION_LIMITS_MS, applyEventBatch } from "../../services/referral/apply-event.js";
import { toApplyEventCommand } from "../../services/referral/domain/commands.js";
import { runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { Overloaded } from "../../services/shared/rpc/errors.js";
import { clickToken, createReferralServer, startHarness, type Harness } from "../../scripts/harness/referral-harness.js";

const test = anyTest as TestFn<{ h: Harness }>;

test.before(async (t) => {
  t.context.h = await startHarness({ maxConnections: 2 });
});
test.after.always(async (t) => {
  await t.context.h?.close();
});

test("a round with no pooled connection within maxWait is answered overloaded with nothing written; the event applies once a connection is free", async (t) => {
  const { h } = t.context;
  const { serverId } = await createReferralServer(h);
  const token = await clickToken(h, serverId, "alice");
  const command = toApplyEventCommand({ serverId, event: "registered", token, serverEventId: "reg-1", refereeIdentity: "bob", ts: 0n, kid: "k1" });

  // Both pooled connections are held by open transactions.
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const holders = [0, 1].map(() => runSqlTransaction(h.deps.prisma, () => held, { timeoutMs: 60_000 }));
  const startedAt = Date.now();
  const [refused] = await applyEventBatch(h.deps, [command]);
  const waitedMs = Date.now() - startedAt;
  release();
  await Promise.all(holders);

  t.false(refused?.ok);
  const error = refused && !refused.ok ? refused.error : undefined;
  t.true(error instanceof Overloaded, String(error));
  t.is((error as Overloaded).retryAfterMs, APPLY_EVENT_TRANSACTION_LIMITS_MS.maxWait);
  t.true(waitedMs >= APPLY_EVENT_TRANSACTION_LIMITS_MS.maxWait - 50, `refused after ${waitedMs} ms`);
  t.is(await h.db.prisma.referralEvent.count({ where: { token } }), 0, "no dedup row");
  t.is(await h.db.prisma.referral.count({ where: { serverId } }), 0, "no anchor");

  const [applied] = await applyEventBatch(h.deps, [command]);
  t.like(applied, { ok: true, value: { kind: "applied", state: "registered", advanced: true } });
});
