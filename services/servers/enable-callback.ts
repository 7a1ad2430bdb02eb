import type { CoreDeps } from "../shared/adapters/deps.js";
import type { HeldReleaseDeps } from "./held-release.js";
import { enableEndpoint, type EndpointRecord } from "./endpoint-store.js";
import { getServer, type ServerRecord } from "./server-store.js";

/**
 * EnableCallback: turns a disabled (auto-disabled or 410 Gone) callback endpoint back on, with a
 * fresh auto-disable period: the server's default endpoint, or the endpoint `endpointId`.
 */
export async function enableCallback(
  deps: CoreDeps & HeldReleaseDeps,
  serverId: string,
  endpointId = "",
): Promise<{ server: ServerRecord; endpoint: EndpointRecord }> {
  const endpoint = await enableEndpoint(deps, serverId, endpointId);
  return { server: await getServer(deps, serverId), endpoint };
}
