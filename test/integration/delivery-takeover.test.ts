/**
 * Take-over of a delivery process's Kafka partitions (issue 18, item 5). Two delivery consumers
 * (createDeliveryConsumer, the production one) share one group on the real Kafka, on a topic and group
 * of the test's own; one runs in a child process. The child is killed (SIGKILL: no LeaveGroup, only
 * the session timeout tells the broker) or stopped (SIGTERM: it leaves its group); then one message is
 * written to every partition, and the time until the surviving consumer has handled the messages of
 * every partition the child held is the take-over time. With kafkajs's defaults (30 s session, 5 s
 * fetch wait) a kill took 30-40 s; DEFAULT_KAFKA_SESSION_TIMEOUT_MS (6 s) with a heartbeat and fetch
 * wait of 1 s must bring it under TAKEOVER_BOUND_MS.
 */
import test, { type ExecutionContext } from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { AssignerProtocol, Kafka, logLevel } from "kafkajs";
import { EnvelopeSchema } from "../../gen/proto/events/v1/events_pb.js";
import { createDeliveryConsumer } from "../../services/delivery/pipeline/consumer.js";
import type { EventBus, ReceivedMessage } from "../../services/shared/adapters/bus.js";
import type { PrismaClient } from "../../services/shared/adapters/db.js";
import { createKafkaBus, ensureTopics } from "../../services/shared/adapters/kafka-bus.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { eventually } from "../helpers/eventually.js";
import { useProcesses } from "../../scripts/harness/processes.js";

/** A killed delivery process's partitions must be handled by another one within this long. */
const TAKEOVER_BOUND_MS = 10_000;
const PARTITIONS = 3;
const brokers = (process.env.KAFKA_BROKERS ?? "").split(",");
const log = createLogger("takeover-test", "silent");

/** A message the delivery consumer handles without a database: an event type it ignores. */
function ping(): Buffer {
  return Buffer.from(toBinary(EnvelopeSchema, create(EnvelopeSchema, { eventId: randomUUID(), type: "takeover.ping" })));
}

/** The partitions each member of `groupId` holds, once the group is stable with `members` members. */
async function assignments(kafka: Kafka, groupId: string, topic: string, members: number): Promise<number[][]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return await eventually(
      async () => {
        const { groups } = await admin.describeGroups([groupId]);
        const group = groups[0];
        if (group?.state !== "Stable" || group.members.length !== members) return undefined;
        const held = group.members.map((m) => AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment[topic] ?? []);
        return held.every((p) => p.length > 0) ? held : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  } finally {
    await admin.disconnect();
  }
}

async function measureTakeover(t: ExecutionContext, end: "SIGKILL" | "SIGTERM"): Promise<number> {
  const suffix = randomBytes(5).toString("hex");
  const topic = `takeover-${suffix}`;
  const groupId = `takeover-${suffix}`;
  await ensureTopics(brokers, [topic], PARTITIONS);
  const kafka = new Kafka({ clientId: "takeover-test", brokers, logLevel: logLevel.NOTHING });

  const child = useProcesses(t).spawn({
    name: "delivery consumer (child)",
    file: "test/helpers/delivery-consumer-child.ts",
    env: { KAFKA_BROKERS: brokers.join(","), TAKEOVER_TOPIC: topic, TAKEOVER_GROUP: groupId },
  });
  await child.waitForOutput(/consumer joined/, 60_000);

  // The surviving consumer: the production consumer on a bus that notes what its handler was given, and when.
  const bus = createKafkaBus({ brokers, clientId: "takeover-test", log });
  const handled: Array<{ message: ReceivedMessage; at: number }> = [];
  const noting: EventBus = {
    ...bus,
    subscribe: ({ handler: _unused, batchHandler, ...opts }) =>
      bus.subscribe({
        ...opts,
        batchHandler: async (messages) => {
          await batchHandler?.(messages);
          for (const message of messages) handled.push({ message, at: performance.now() });
        },
      }),
  };
  const survivor = createDeliveryConsumer({ bus: noting, prisma: {} as PrismaClient, log, groupId, topic });
  t.teardown(async () => {
    await survivor.stop();
    await bus.close();
  });
  await survivor.start();
  const held = await assignments(kafka, groupId, topic, 2);
  // The member that is not this process is the child; describeGroups lists members in no fixed order, so the
  // child's partitions are those the survivor does not handle: found by writing after the end below.
  t.is(held.flat().length, PARTITIONS, "two members share every partition");

  const startedAt = performance.now();
  if (end === "SIGKILL") await child.kill();
  else await child.stop();
  const producer = kafka.producer();
  await producer.connect();
  t.teardown(() => producer.disconnect());
  const sent = new Map<number, string>();
  for (let partition = 0; partition < PARTITIONS; partition++) {
    const [meta] = await producer.send({ topic, acks: -1, messages: [{ partition, key: "k", value: ping() }] });
    sent.set(partition, meta!.baseOffset ?? "");
  }
  // Every partition's message handled by the survivor: the child's partitions have been taken over.
  const done = await eventually(
    () => {
      const times = [...sent].map(([partition, offset]) => handled.find((h) => h.message.partition === partition && h.message.offset === offset)?.at);
      return times.every((at) => at !== undefined) ? Math.max(...(times as number[])) : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 50 },
  );
  return Math.round(done - startedAt);
}

test.serial(`a killed delivery consumer (SIGKILL, no leave): the other one handles its partitions within ${TAKEOVER_BOUND_MS} ms`, async (t) => {
  const ms = await measureTakeover(t, "SIGKILL");
  t.log(`take-over after SIGKILL: ${ms} ms`);
  t.true(ms < TAKEOVER_BOUND_MS, `${ms} ms`);
});

test.serial(`a stopped delivery consumer (SIGTERM, leaves its group): the other one handles its partitions within ${TAKEOVER_BOUND_MS} ms`, async (t) => {
  const ms = await measureTakeover(t, "SIGTERM");
  t.log(`take-over after SIGTERM: ${ms} ms`);
  t.true(ms < TAKEOVER_BOUND_MS, `${ms} ms`);
});
