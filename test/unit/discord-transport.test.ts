/**
 * The Discord transport's own rules that need no Discord (services/delivery/pipeline/discord-transport.ts): every
 * delivery handed to it gets an outcome, also when a database statement fails while its message is put together, and
 * none is sent after its lease (another dispatcher may have claimed it by then).
 */
import test from "ava";
import type { ClaimedDelivery } from "../../services/delivery/pipeline/claim-deliveries.js";
import { createDiscordTransport, type DiscordTransportDeps } from "../../services/delivery/pipeline/discord-transport.js";
import type { DiscordRest } from "../../services/shared/adapters/discord-rest.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { parseRetrySchedule } from "../../services/delivery/pipeline/retry-schedule.js";

const NOW = new Date("2027-01-01T12:00:00Z");

function delivery(over: Partial<ClaimedDelivery> = {}): ClaimedDelivery {
  return {
    id: "11111111-1111-7111-8111-111111111111",
    serverId: "22222222-2222-4222-8222-222222222222",
    heartId: "33333333-3333-7333-8333-333333333333",
    eventType: "heart.counted",
    username: "Steve",
    voterIdentity: "voter-1",
    period: "2027-01",
    attempts: 0,
    leaseUntil: new Date(NOW.getTime() + 40_000),
    transport: "discord",
    endpointId: "44444444-4444-4444-8444-444444444444",
    countedAt: NOW,
    event: null,
    rewardCounts: null,
    platformIds: { steamId: null, discordId: null, minecraftUuid: null, accountId: null },
    nextEligibleAt: null,
    payloadVersion: 1,
    callbackUrl: null,
    standardWebhooks: false,
    publicKeySignatures: false,
    votifier: null,
    discord: { webhookId: "900000000000000001", sealedToken: "sealed", templates: {}, serverName: "S", embed: false },
    ...over,
  } as ClaimedDelivery;
}

/** A Discord client that must not be asked (the tests end before a message is sent), and records whether it was. */
function unusedRest(): DiscordRest & { asked: number } {
  const rest = {
    asked: 0,
    readyAt: () => undefined,
    request: async () => {
      rest.asked += 1;
      return { kind: "ok" as const, status: 200, body: {} };
    },
    close: async () => undefined,
  };
  return rest as unknown as DiscordRest & { asked: number };
}

function deps(rest: DiscordRest): DiscordTransportDeps {
  return {
    // Not a client createPrisma made: the executor refuses it at the first statement, as a database failure would.
    prisma: {} as DiscordTransportDeps["prisma"],
    secretBox: { open: () => "token", seal: (s: string) => s } as unknown as DiscordTransportDeps["secretBox"],
    log: createLogger("discord-transport-test", "silent"),
    now: () => NOW,
    schedule: parseRetrySchedule("1m", { jitterRatio: 0 }),
    timeoutMs: 10_000,
    allowInsecure: false,
    rest,
  };
}

test("a database failure while a message is put together gives the delivery taken for it a failed outcome (retried later), never a send that hangs", async (t) => {
  const rest = unusedRest();
  const transport = createDiscordTransport(deps(rest));
  const outcome = await transport.send(delivery());
  t.is(outcome.kind, "failed");
  t.regex((outcome as { error: string }).error, /createPrisma/);
  t.is(rest.asked, 0, "nothing was posted");
});

test("a delivery whose lease cannot hold a send any more goes back due now, deferred, and is not sent", async (t) => {
  const rest = unusedRest();
  const transport = createDiscordTransport(deps(rest));
  const outcome = await transport.send(delivery({ leaseUntil: new Date(NOW.getTime() + 5_000) }));
  t.like(outcome, { kind: "deferred", retryAt: NOW });
  t.is(rest.asked, 0, "nothing was posted");
});
