/**
 * What pipeline tests read back: the heart.counted message the relay published for a heart (to hand it to the delivery
 * consumer again, as a redelivered Kafka message), and whether a callback a receiver got is signed with a secret.
 */
import { fromBinary } from "@bufbuild/protobuf";
import { EnvelopeSchema } from "../../gen/proto/events/v1/events_pb.js";
import type { ReceivedMessage } from "../../services/shared/adapters/bus.js";
import { expectedCallbackMac, hexEquals, parseCallbackSignature } from "../../scripts/harness/delivery-harness.js";
import { headerOf, type RecordedRequest } from "../../scripts/harness/receiver.js";
import type { TestStack } from "../../scripts/harness/stack.js";

/** The heart.counted message the relay published for `heartId`, as the consumer receives it (from the outbox). */
export async function heartCountedMessageOf(stack: TestStack, serverId: string, heartId: string): Promise<ReceivedMessage> {
  const rows = await stack.prisma.outboxMessage.findMany({ where: { key: serverId, type: "heart.counted" } });
  const row = rows.find((r) => {
    const envelope = fromBinary(EnvelopeSchema, r.payload);
    return envelope.payload.case === "heartCounted" && envelope.payload.value.heartId === heartId;
  });
  if (row === undefined) throw new Error("no outbox row of the heart");
  return { topic: row.topic, key: row.key, value: row.payload, partition: 0, offset: row.id.toString() };
}

/** True when `request`'s X-Service-Signature has a v1 MAC of its body under `secret`. */
export function isSignedWith(request: RecordedRequest, secret: string): boolean {
  const parsed = parseCallbackSignature(headerOf(request, "x-service-signature"));
  return parsed?.v1.some((mac) => hexEquals(mac, expectedCallbackMac(secret, parsed.t, request.body))) ?? false;
}
