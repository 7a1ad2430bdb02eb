import type { Delivery as DeliveryRow } from "../../gen/prisma/client.js";
import type { CoreDeps } from "../shared/deps.js";

/** Deliveries per page when the caller gives no limit, and the most one page may hold. */
export const DEFAULT_DELIVERY_PAGE = 50;
export const MAX_DELIVERY_PAGE = 500;

/** A server's delivery list filter; `username` is bounded and trimmed ("" matches every player), `limit` 0 means the default page. */
export interface DeliveryListQuery {
  serverId: string;
  status: "pending" | "delivered" | "failed" | undefined;
  transport: "callback" | "votifier" | "pull" | undefined;
  username: string;
  limit: number;
}

/** A server's deliveries, newest first, filtered by status, transport and a case-insensitive player search. */
export async function listDeliveries(deps: CoreDeps, query: DeliveryListQuery): Promise<DeliveryRow[]> {
  const { serverId, status, transport, username } = query;
  return deps.prisma.delivery.findMany({
    where: {
      serverId,
      ...(status ? { status } : {}),
      ...(transport ? { transport } : {}),
      ...(username === "" ? {} : { username: { contains: username, mode: "insensitive" } }),
    },
    orderBy: [{ createdAt: "desc" }, { id: "asc" }],
    take: Math.min(query.limit === 0 ? DEFAULT_DELIVERY_PAGE : query.limit, MAX_DELIVERY_PAGE),
  });
}
