import type { ClaimKeyResolver } from "../claims/resolve-claim-key.js";
import { requireServerId } from "../servers/server-exists.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError } from "../shared/rpc/errors.js";

/**
 * The server a reward queue call is about: by its claim key (the plugin's, through the gateway; null for a wrong,
 * rotated-out or malformed key, which is not an error) or by its id (owners on their own servers, checked by the access
 * layer before this; admins). Exactly one of the two: invalid_argument otherwise, so an owner session cannot name
 * another server's key beside its own server's id.
 */
export async function resolveQueueServer(deps: CoreDeps, resolveKey: ClaimKeyResolver, req: { claimKey: string; serverId: string }): Promise<string | null> {
  const byKey = req.claimKey !== "";
  if (byKey === (req.serverId.trim() !== "")) throw new DomainError("invalid_argument", "exactly one of claim_key and server_id is required");
  return byKey ? resolveKey(req.claimKey) : requireServerId(deps, req.serverId);
}
