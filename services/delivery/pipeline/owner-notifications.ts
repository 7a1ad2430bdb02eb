import { create } from "@bufbuild/protobuf";
import { OwnerNotificationKind, OwnerNotificationSchema } from "../../../gen/proto/events/v1/events_pb.js";
import { OWNER_NOTIFICATIONS_TOPIC } from "../../shared/adapters/bus.js";
import { insertOutboxRows, toOutboxRow, type OutboxEvent } from "../../shared/adapters/outbox.js";
import type { SqlTx } from "../../shared/adapters/sql/executor.js";

/** Envelope types of owner.notifications.v1. */
export const ENDPOINT_DISABLED_EVENT = "owner.endpoint_disabled";
export const DELIVERY_FAILED_EVENT = "owner.delivery_failed";

/** The server a notification is about, as the disabling or failing transaction read it. */
export interface NotifiedServer {
  id: string;
  name: string;
  callbackUrl: string | null;
}

/**
 * Writes `owner.endpoint_disabled` to the outbox inside the transaction that disabled the
 * callback, so the notification is published exactly when the disable commits.
 */
export async function notifyEndpointDisabled(tx: SqlTx, server: NotifiedServer, reason: string, at: Date): Promise<void> {
  await writeNotification(tx, {
    topic: OWNER_NOTIFICATIONS_TOPIC,
    type: ENDPOINT_DISABLED_EVENT,
    serverId: server.id,
    occurredAt: at,
    payload: {
      case: "ownerNotification",
      value: create(OwnerNotificationSchema, {
        kind: OwnerNotificationKind.ENDPOINT_DISABLED,
        serverId: server.id,
        serverName: server.name,
        callbackUrl: server.callbackUrl ?? "",
        reason,
      }),
    },
  });
}

/** What a delivery that failed for good reports. */
export interface FailedDelivery {
  id: string;
  heartId: string;
  eventType: string;
  username: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string;
  transport: string;
  /** Where its last attempt went (the callback URL, or votifier://host:port). */
  target: string;
}

/** Writes `owner.delivery_failed` to the outbox inside the transaction that marked the delivery failed. */
export async function notifyDeliveryFailed(tx: SqlTx, server: NotifiedServer, delivery: FailedDelivery, at: Date): Promise<void> {
  await writeNotification(tx, {
    topic: OWNER_NOTIFICATIONS_TOPIC,
    type: DELIVERY_FAILED_EVENT,
    serverId: server.id,
    occurredAt: at,
    payload: {
      case: "ownerNotification",
      value: create(OwnerNotificationSchema, {
        kind: OwnerNotificationKind.DELIVERY_FAILED,
        serverId: server.id,
        serverName: server.name,
        callbackUrl: server.callbackUrl ?? "",
        reason: delivery.lastError,
        deliveryId: delivery.id,
        heartId: delivery.heartId,
        eventType: delivery.eventType,
        username: delivery.username,
        attempts: delivery.attempts,
        lastStatusCode: delivery.lastStatusCode ?? 0,
        transport: delivery.transport,
        target: delivery.target,
      }),
    },
  });
}

/** Writes one notification's outbox row inside the caller's transaction (the outbox's one INSERT). */
async function writeNotification(tx: SqlTx, event: OutboxEvent): Promise<void> {
  await tx.execute(insertOutboxRows([{ idx: 0, row: toOutboxRow(event) }]));
}
