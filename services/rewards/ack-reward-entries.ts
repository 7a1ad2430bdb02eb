import { create } from "@bufbuild/protobuf";
import { AckRewardEntriesResponseSchema, type AckRewardEntriesRequest, type AckRewardEntriesResponse } from "../../gen/proto/rewards/v1/rewards_pb.js";
import type { ClaimKeyResolver } from "../claims/resolve-claim-key.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { runSqlTransaction } from "../shared/adapters/sql/executor.js";
import { DomainError } from "../shared/rpc/errors.js";
import { isUuid } from "../shared/values/ids.js";
import { MAX_ACK_IDS } from "../shared/values/reward-queue-limits.js";
import { resolveQueueServer } from "./resolve-queue-server.js";
import { ackRewardEntries, findServerRewardEntries } from "./reward-queue-store.js";

/** How long an acknowledgement's transaction may stay open (two statements by primary key). */
const ACK_TRANSACTION_TIMEOUT_MS = 5_000;

/** The ids to acknowledge, lower-cased and deduplicated in their order; invalid_argument for none, too many or a malformed one. */
export function ackIdsOf(ids: readonly string[]): string[] {
  if (ids.length === 0) throw new DomainError("invalid_argument", "ids: at least one id is required");
  if (ids.length > MAX_ACK_IDS) throw new DomainError("invalid_argument", `ids: at most ${MAX_ACK_IDS} per acknowledgement`);
  const bad = ids.findIndex((id) => !isUuid(id));
  if (bad !== -1) throw new DomainError("invalid_argument", `ids[${bad}]: not an entry id (a uuid)`);
  return [...new Set(ids.map((id) => id.toLowerCase()))];
}

/**
 * AckRewardEntries: the ids (invalid_argument naming the problem, before the key), the server (a wrong key: key_valid false,
 * nothing written), then in one transaction the acknowledgement of the server's pending entries among the ids and the read
 * of which ids are the server's at all. `acked`: every id that is the server's entry (acknowledged by this call or an
 * earlier one: idempotent); `unknown`: the others (no such entry, another server's, or removed by retention).
 */
export async function acknowledgeRewardEntries(deps: CoreDeps, resolveKey: ClaimKeyResolver, req: AckRewardEntriesRequest): Promise<AckRewardEntriesResponse> {
  const ids = ackIdsOf(req.ids);
  const serverId = await resolveQueueServer(deps, resolveKey, req);
  if (serverId === null) return create(AckRewardEntriesResponseSchema, { keyValid: false });
  const known = await runSqlTransaction(
    deps.prisma,
    async (tx) => {
      await ackRewardEntries(tx, { serverId, ids, at: deps.now() });
      return new Set(await findServerRewardEntries(tx, { serverId, ids }));
    },
    { timeoutMs: ACK_TRANSACTION_TIMEOUT_MS },
  );
  return create(AckRewardEntriesResponseSchema, {
    keyValid: true,
    serverId,
    acked: ids.filter((id) => known.has(id)),
    unknown: ids.filter((id) => !known.has(id)),
  });
}
