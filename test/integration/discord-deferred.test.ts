/**
 * A Discord rate limit longer than the transport waits (DISCORD_MAX_WAIT_MS) defers the deliveries instead of failing
 * them: no attempt is counted or recorded, the endpoint's health does not start failing (nothing toward the 5-day
 * disable), and the delivery is due again when the bucket resets. The emulator's per-webhook limit is one message per
 * two minutes here, so the second vote meets an exhausted bucket.
 */
import anyTest, { type TestFn } from "ava";
import { Prisma } from "../../gen/prisma/client.js";
import { startDiscordEmulator, type DiscordEmulator } from "../../scripts/harness/discord-emulator.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { DISCORD_MAX_WAIT_MS } from "../../services/delivery/pipeline/discord-transport.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";
import { runSql } from "../../services/shared/adapters/sql/executor.js";
import { eventually } from "../helpers/eventually.js";

interface Context {
  stack: TestStack;
  discord: DiscordEmulator;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const discord = await startDiscordEmulator({ webhookLimit: { limit: 1, perMs: 120_000 } });
  const stack = await startStack({
    pipeline: {
      name: "discord-deferred",
      delivery: { schedule: parseRetrySchedule("200ms", { jitterRatio: 0 }), pollIntervalMs: 100, discordApiBaseUrl: discord.baseUrl },
    },
  });
  t.context = { stack, discord };
});

test.after.always(async (t) => {
  await t.context.stack?.close();
  await t.context.discord?.close();
});

test("an exhausted Discord bucket that resets past the transport's wait defers the delivery: not sent, no attempt counted or recorded, the endpoint not failing", async (t) => {
  const { stack, discord } = t.context;
  const { server } = await stack.clients.admin.createServer({ name: "Deferred", registrationUrl: "https://example.com/register" });
  const serverId = server!.id;
  const hook = discord.createWebhook("900000000000002000");
  const { endpoint } = await stack.clients.admin.createDiscordEndpoint({
    serverId,
    webhookUrl: `https://discord.com/api/webhooks/${hook.id}/${hook.token}`,
    eventTypes: ["heart.counted"],
  });
  const endpointId = endpoint!.id;
  const cast = (username: string, ip: string) =>
    stack.clients.hearts.castHeart({ serverId, username, voterIdentity: `voter-${username}`, ip, userAgent: "Mozilla/5.0 (deferred test)" });

  await cast("first", "10.200.1.7");
  await eventually(() => discord.messages("900000000000002000").length === 1, { message: "the first vote posted" });
  const castAt = Date.now();
  await cast("second", "10.200.2.7");

  type Row = { status: string; attempts: number; next_attempt_at: Date; lease_until: Date | null; logged: number; failing: boolean };
  const row = await eventually(
    async () => {
      const [r] = await runSql<Row>(
        stack.prisma,
        Prisma.sql`SELECT d.status::text, d.attempts, d.next_attempt_at, d.lease_until,
                          (SELECT count(*)::int FROM delivery_attempts a WHERE a.delivery_id = d.id) AS logged,
                          coalesce((SELECT h.failing_since IS NOT NULL FROM callback_health h WHERE h.endpoint_id = d.endpoint_id), false) AS failing
                   FROM deliveries d WHERE d.endpoint_id = ${endpointId}::uuid AND d.username = 'second'`,
      );
      // Deferred: the lease given back and due again past the transport's longest wait.
      return r && r.lease_until === null && r.next_attempt_at.getTime() > castAt + DISCORD_MAX_WAIT_MS ? r : undefined;
    },
    { timeoutMs: 30_000, message: "the second vote deferred" },
  );
  t.like(row, { status: "pending", attempts: 0, logged: 0, failing: false });
  t.true(row.next_attempt_at.getTime() <= castAt + 121_000, "due again when the bucket resets");
  t.is(discord.messages("900000000000002000").length, 1, "nothing more was posted");
  t.is(discord.requests.filter((r) => r.status === 429).length, 0, "nothing was sent into the exhausted bucket");
  const [health] = await runSql<{ disabled: boolean }>(
    stack.prisma,
    Prisma.sql`SELECT disabled_at IS NOT NULL AS disabled FROM callback_endpoints WHERE id = ${endpointId}::uuid`,
  );
  t.false(health!.disabled);
});
