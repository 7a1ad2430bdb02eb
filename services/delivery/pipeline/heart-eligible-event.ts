import type { PrismaClient } from "../../shared/adapters/db.js";
import { sqlOf } from "../../shared/adapters/sql/executor.js";
import { toHeartEligibleDelivery } from "./domain/heart-eligible.js";
import type { NewDelivery } from "./delivery-types.js";
import { insertEventDeliveries } from "./insert-deliveries.js";

/**
 * Stores the heart.eligible deliveries of a batch's counted hearts (one statement; idempotent per server, transport,
 * endpoint and event id, so a redelivered batch adds nothing). Cost for a server with no endpoint (and no pull list)
 * subscribed to heart.eligible: per heart its server read by primary key and its live endpoints by their server index,
 * nothing written. Returns how many deliveries were stored.
 */
export async function storeHeartEligibleEvents(prisma: PrismaClient, hearts: readonly NewDelivery[]): Promise<number> {
  const events = hearts.flatMap((h) => {
    const e = toHeartEligibleDelivery(h);
    return e === undefined ? [] : [e];
  });
  return events.length === 0 ? 0 : insertEventDeliveries(sqlOf(prisma), events);
}
