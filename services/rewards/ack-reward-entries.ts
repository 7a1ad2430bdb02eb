import { create } from "@bufbuild/protobuf";
import { AckRewardEntriesResponseSchema, type AckRewardEntriesRequest, type AckRewardEntriesResponse } from "../../gen/proto/rewards/v1/rewards_pb.js";
import type { ClaimKeyResolver } from "../claims/resolve-claim-key.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { runSqlTransaction } from "../shared/adapters/sql/executor.js";
import { DomainError } from "../shared/rpc/errors.js";
import { isUuid } from "../shared/values/ids.js";
import { MAX_ACK_IDS } from "../shared/values/reward-queue-limits.js";
import { takeQueuePayoutsSql, type WithdrawOthers } from "../payouts/write-payouts.js";
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

/** What an acknowledgement needs beyond the core deps: pay-once's withdrawal of a paid heart from the other transports. */
export type AckRewardEntriesDeps = CoreDeps & { withdrawOthers: WithdrawOthers };

/**
 * AckRewardEntries: the ids (invalid_argument naming the problem, before the key), the server (a wrong key: key_valid false,
 * nothing written), then in one transaction the acknowledgement of the server's pending entries among the ids and the read
 * of which ids are the server's at all; in pay-once mode the hearts of the `vote` entries acknowledged now are paid by the
 * queue in the same transaction (takeQueuePayoutsSql), and withdrawn from the other transports after it. `acked`: every id that is the server's entry (acknowledged by this call or an
 * earlier one: idempotent); `unknown`: the others (no such entry, another server's, or removed by retention).
 */
export async function acknowledgeRewardEntries(
  deps: AckRewardEntriesDeps,
  resolveKey: ClaimKeyResolver,
  req: AckRewardEntriesRequest,
): Promise<AckRewardEntriesResponse> {
  const ids = ackIdsOf(req.ids);
  const serverId = await resolveQueueServer(deps, resolveKey, req);
  if (serverId === null) return create(AckRewardEntriesResponseSchema, { keyValid: false });
  const now = deps.now();
  const { known, paidHearts } = await runSqlTransaction(
    deps.prisma,
    async (tx) => {
      const ackedNow = await ackRewardEntries(tx, { serverId, ids, at: now });
      // Pay-once: the vote entries acknowledged now pay their hearts, in this transaction (no statement when none was).
      const paid = ackedNow.length === 0 ? [] : await tx.query<{ heart_id: string }>(takeQueuePayoutsSql(serverId, ackedNow, now));
      return { known: new Set(await findServerRewardEntries(tx, { serverId, ids })), paidHearts: paid.map((p) => p.heart_id) };
    },
    { timeoutMs: ACK_TRANSACTION_TIMEOUT_MS },
  );
  // After the commit (never inside it: a ledger claim holds its ledger row while it takes the payout), as every payer does.
  if (paidHearts.length > 0) await deps.withdrawOthers(deps.prisma, { serverId, heartIds: paidHearts, paidBy: "queue", now }, deps.log);
  return create(AckRewardEntriesResponseSchema, {
    keyValid: true,
    serverId,
    acked: ids.filter((id) => known.has(id)),
    unknown: ids.filter((id) => !known.has(id)),
  });
}
