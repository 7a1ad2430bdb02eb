import type { CoreDeps } from "../shared/deps.js";
import { requireServer } from "./server-exists.js";
import { type ServerRecord, updateServer } from "./server-store.js";

/** Turns a disabled (auto-disabled or 410 Gone) callback endpoint back on, with a fresh auto-disable period. */
export async function enableCallback(deps: CoreDeps, serverId: string): Promise<ServerRecord> {
  await requireServer(deps, serverId);
  // A re-enabled endpoint gets a fresh auto-disable period: its old run of failures ends here (before enabling, so a failure in between cannot re-disable at once).
  await deps.prisma.callbackHealth.updateMany({ where: { serverId }, data: { failingSince: null } });
  return updateServer(deps, serverId, { callbackDisabledAt: null, callbackDisabledReason: null });
}
