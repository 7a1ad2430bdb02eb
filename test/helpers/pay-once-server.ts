import { createDispatcher, type Dispatcher } from "../../services/delivery/pipeline/dispatcher.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { insertSecret, setDefaultEndpoint } from "../../scripts/harness/delivery-harness.js";
import type { TestStack } from "../../scripts/harness/stack.js";

/**
 * A server every transport can pay a heart through: a claim key (check/claim API and reward queue), the pull API on, an
 * HTTP callback to `callbackUrl` with a secret, and pay-once as given. `reported`: pay-once as SetClaimSettings reports it.
 */
export async function createPayOnceServer(stack: TestStack, opts: { callbackUrl: string; payOnce: boolean; name?: string }) {
  const { admin } = stack.clients;
  const { server } = await admin.createServer({ name: opts.name ?? "Rust x3" });
  const serverId = server!.id;
  const { claimKey } = await admin.rotateClaimKey({ serverId });
  await admin.setPullEnabled({ serverId, enabled: true });
  await setDefaultEndpoint(stack.prisma, serverId, { url: opts.callbackUrl, standardWebhooks: false });
  await insertSecret(stack.prisma, stack.secretBox, serverId, "callback");
  const set = await admin.setClaimSettings({ serverId, paysOnce: opts.payOnce });
  return { serverId, claimKey, reported: set.server!.claims!.paysOnce };
}

/** The production dispatcher on the stack's database, polling every 25 ms (not started), stopped with the test. */
export function createTestDispatcher(
  t: { context: { stack: TestStack }; teardown(fn: () => Promise<void>): void },
  opts: { timeoutMs?: number; schedule?: string } = {},
): Dispatcher {
  const { stack } = t.context;
  const d = createDispatcher({
    prisma: stack.prisma,
    secretBox: stack.secretBox,
    log: stack.log,
    now: () => new Date(),
    schedule: parseRetrySchedule(opts.schedule ?? "100ms,200ms,300ms", { jitterRatio: 0 }),
    timeoutMs: opts.timeoutMs ?? 2_000,
    allowInsecure: true,
    pollIntervalMs: 25,
  });
  t.teardown(() => d.stop());
  return d;
}
