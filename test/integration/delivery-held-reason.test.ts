/**
 * A pending delivery the dispatcher will not send reads as held, with why (services/shared/values/held-reason.ts),
 * and the rule is the claim's own: for every state of a callback endpoint and of a server's Votifier settings, a
 * delivery is held exactly when the claim's predicate (sendableDeliverySql) would not lease it.
 */
import anyTest, { type TestFn } from "ava";
import { randomUUID } from "node:crypto";
import { Prisma } from "../../gen/prisma/client.js";
import { sendableDeliverySql } from "../../services/delivery/pipeline/claim-deliveries.js";
import { runSql } from "../../services/shared/adapters/sql/executor.js";
import { insertSecret, insertServer, setDefaultEndpoint, startHarness, type Harness } from "../../scripts/harness/delivery-harness.js";

const test = anyTest as TestFn<{ h: Harness }>;
test.before(async (t) => {
  t.context = { h: await startHarness() };
});
test.after.always(async (t) => {
  await t.context.h?.close();
});

/** One server in one state, with one pending delivery of `transport`; its expected held reason. */
const CASES = [
  { name: "callback without a URL", transport: "callback", url: null, disabled: false, deleted: false, votifier: false, expected: "no_callback_url" },
  {
    name: "callback to a live endpoint",
    transport: "callback",
    url: "https://game.example/hook",
    disabled: false,
    deleted: false,
    votifier: false,
    expected: "",
  },
  {
    name: "callback to a disabled endpoint",
    transport: "callback",
    url: "https://game.example/hook",
    disabled: true,
    deleted: false,
    votifier: false,
    expected: "endpoint_disabled",
  },
  {
    name: "callback to a deleted endpoint",
    transport: "callback",
    url: "https://game.example/hook",
    disabled: false,
    deleted: true,
    votifier: false,
    expected: "endpoint_deleted",
  },
  { name: "Votifier vote while Votifier is off", transport: "votifier", url: null, disabled: false, deleted: false, votifier: false, expected: "votifier_off" },
  { name: "Votifier vote while Votifier is on", transport: "votifier", url: null, disabled: false, deleted: false, votifier: true, expected: "" },
] as const;

for (const c of CASES) {
  test(`${c.name}: held_reason "${c.expected}", and held exactly when the claim would not lease it`, async (t) => {
    const { h } = t.context;
    const { prisma } = h.db;
    const serverId = await insertServer(prisma, { callbackUrl: c.url });
    await insertSecret(prisma, h.deps.secretBox, serverId, "callback");
    if (c.disabled || c.deleted) await setDefaultEndpoint(prisma, serverId, c.disabled ? { disabledAt: new Date(), disabledReason: "gone (410)" } : {});
    if (c.deleted) await prisma.callbackEndpoint.updateMany({ where: { serverId }, data: { deletedAt: new Date() } });
    if (c.votifier) await prisma.server.update({ where: { id: serverId }, data: { votifierHost: "127.0.0.1", votifierPort: 8192, votifierToken: "sealed" } });
    const endpoint = await prisma.callbackEndpoint.findFirstOrThrow({ where: { serverId } });
    const heartId = randomUUID();
    const delivery = await prisma.delivery.create({
      data: {
        serverId,
        heartId,
        transport: c.transport,
        endpointId: c.transport === "callback" ? endpoint.id : null,
        dedupKey: heartId,
        eventType: "heart.counted",
        username: "Steve",
        voterIdentity: "voter-1",
        period: "2026-11",
        countedAt: new Date(),
      },
    });
    const { deliveries } = await h.delivery.listDeliveries({ serverId });
    t.is(deliveries.find((d) => d.id === delivery.id)?.heldReason, c.expected);
    const [row] = await runSql<{ sendable: boolean }>(
      prisma,
      Prisma.sql`SELECT ${sendableDeliverySql(new Date())} AS sendable
                 FROM deliveries d JOIN servers s ON s.id = d.server_id LEFT JOIN callback_endpoints e ON e.id = d.endpoint_id
                 WHERE d.id = ${delivery.id}::uuid`,
    );
    t.is(row?.sendable, c.expected === "", "held exactly when the claim's rule would not send it");
  });
}
