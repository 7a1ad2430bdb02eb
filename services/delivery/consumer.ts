import { fromBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { EnvelopeSchema, type Envelope } from "../../gen/proto/events/v1/events_pb.js";
import { HEARTS_TOPIC, type EventBus, type ReceivedMessage, type Subscription } from "../shared/bus.js";
import type { PrismaClient } from "../shared/db.js";
import type { Logger } from "../shared/log.js";
import { insertDelivery, type NewDelivery } from "./store.js";

/** The default consumer group of the delivery service. */
export const DELIVERY_CONSUMER_GROUP = "delivery.v1";

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The consumer's dependencies. */
export interface DeliveryConsumerOptions {
  bus: EventBus;
  prisma: PrismaClient;
  log: Logger;
  groupId?: string;
  /** Defaults to HEARTS_TOPIC; tests pass a topic of their own. */
  topic?: string;
  /** Called after a delivery row was stored, so a dispatcher in the same process can claim it at once. */
  onStored?: () => void;
}

/** A consumer that can be started and stopped. */
export interface DeliveryConsumer {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Handles one message (exposed for tests of poison handling and idempotency). */
  handle(message: ReceivedMessage): Promise<void>;
}

/** What decoding a message gave. */
export type DecodedMessage = { kind: "delivery"; delivery: NewDelivery; eventId: string } | { kind: "ignored"; type: string } | { kind: "poison"; error: string };

/**
 * Decodes a hearts topic message. `heart.counted` with a complete payload becomes
 * a delivery; other event types are ignored; anything undecodable or incomplete is
 * poison. Pure.
 */
export function decodeHeartMessage(value: Uint8Array): DecodedMessage {
  let envelope: Envelope;
  try {
    envelope = fromBinary(EnvelopeSchema, value);
  } catch (error) {
    // Failure policy: an undecodable message can never succeed; report it as poison so it is skipped, not retried forever.
    return { kind: "poison", error: `undecodable envelope: ${(error as Error).message}` };
  }
  if (envelope.type !== "heart.counted") return { kind: "ignored", type: envelope.type };
  if (envelope.payload.case !== "heartCounted") return { kind: "poison", error: "heart.counted without a heartCounted payload" };
  const h = envelope.payload.value;
  const serverId = h.serverId || envelope.serverId;
  if (!UUID_PATTERN.test(h.heartId) || !UUID_PATTERN.test(serverId)) return { kind: "poison", error: "heart_id or server_id is not a uuid" };
  if (h.username === "" || h.voterIdentity === "" || !/^[0-9]{4}-[0-9]{2}$/.test(h.period)) {
    return { kind: "poison", error: "heart.counted payload is missing username, voter_identity or period" };
  }
  const countedAt = h.countedAt ?? envelope.occurredAt;
  return {
    kind: "delivery",
    eventId: envelope.eventId,
    delivery: {
      heartId: h.heartId,
      serverId,
      eventType: "heart.counted",
      username: h.username,
      voterIdentity: h.voterIdentity,
      period: h.period,
      streakDay: h.streakDay > 0 ? h.streakDay : null,
      countedAt: countedAt ? timestampDate(countedAt) : new Date(0),
    },
  };
}

/**
 * Subscribes to the hearts topic and turns each `heart.counted` into a stored
 * delivery row (idempotent per heart and server), then resolves so the bus commits
 * the offset. It never does HTTP: the dispatcher sends, so a slow receiver never
 * blocks a partition. Database errors throw, leaving the offset uncommitted so
 * the message comes again.
 */
export function createDeliveryConsumer(opts: DeliveryConsumerOptions): DeliveryConsumer {
  const topic = opts.topic ?? HEARTS_TOPIC;
  const groupId = opts.groupId ?? DELIVERY_CONSUMER_GROUP;
  let subscription: Subscription | undefined;

  const handle = async (message: ReceivedMessage): Promise<void> => {
    const decoded = decodeHeartMessage(message.value);
    if (decoded.kind === "poison") {
      // Failure policy: skip and log poison messages (with their coordinates to find them again); blocking the partition would stop every server's callbacks.
      opts.log.error({ topic: message.topic, partition: message.partition, offset: message.offset, error: decoded.error }, "skipping poison message");
      return;
    }
    if (decoded.kind === "ignored") {
      opts.log.debug({ type: decoded.type, offset: message.offset }, "ignoring event type");
      return;
    }
    const outcome = await insertDelivery(opts.prisma, decoded.delivery);
    if (outcome === "unknown_server") {
      // Failure policy: the server was deleted after the heart counted; there is no one to call back, so skip.
      opts.log.warn({ heartId: decoded.delivery.heartId, serverId: decoded.delivery.serverId }, "heart for an unknown server; no delivery");
      return;
    }
    opts.log.debug({ heartId: decoded.delivery.heartId, eventId: decoded.eventId, outcome }, "delivery stored");
    opts.onStored?.();
  };

  return {
    handle,
    async start() {
      if (subscription) return;
      subscription = await opts.bus.subscribe({ groupId, topics: [topic], handler: handle, fromBeginning: true });
    },
    async stop() {
      const current = subscription;
      subscription = undefined;
      await current?.stop();
    },
  };
}
