import { create } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import {
  RequeueRewardEntriesResponseSchema,
  type RequeueRewardEntriesRequest,
  type RequeueRewardEntriesResponse,
} from "../../gen/proto/rewards/v1/rewards_pb.js";
import { requireServerId } from "../servers/server-exists.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { runSqlTransaction } from "../shared/adapters/sql/executor.js";
import { DomainError } from "../shared/rpc/errors.js";
import { isUuid } from "../shared/values/ids.js";
import { requiredText } from "../shared/values/contract.js";
import { REQUEUE_PAGE_ENTRIES, requeueAckedRewardEntries, type RequeueCursor } from "./reward-queue-store.js";

/** How long one re-queue page's transaction may stay open (one statement over at most REQUEUE_PAGE_ENTRIES entries). */
const REQUEUE_TRANSACTION_TIMEOUT_MS = 15_000;

/** A page cursor as the caller passes it back: `<acknowledgement time, ISO>_<entry id>`. */
export function requeueCursorText(c: RequeueCursor): string {
  return `${c.ackedAt.toISOString()}_${c.id}`;
}

/** The cursor a previous page returned; invalid_argument for anything else. */
function cursorOf(text: string): RequeueCursor | null {
  if (text.trim() === "") return null;
  const [at, id, extra] = text.trim().split("_");
  const ackedAt = new Date(at ?? "");
  if (extra !== undefined || id === undefined || !isUuid(id) || Number.isNaN(ackedAt.getTime()))
    throw new DomainError("invalid_argument", "after: not a cursor a previous page returned (next_after)");
  return { ackedAt, id: id.toLowerCase() };
}

/**
 * RequeueRewardEntries (docs/reward-queue.md, "Re-queue after a lost server"): one page of the server's entries
 * acknowledged in [acked_from, acked_to) queued again as new entries. The caller loops on next_after until it is empty;
 * each page is its own transaction, so a long range never holds one open.
 */
export async function requeueRewardEntries(deps: CoreDeps, req: RequeueRewardEntriesRequest): Promise<RequeueRewardEntriesResponse> {
  const serverId = await requireServerId(deps, req.serverId);
  if (req.ackedFrom === undefined) throw new DomainError("invalid_argument", requiredText("acked_from"));
  if (req.ackedTo === undefined) throw new DomainError("invalid_argument", requiredText("acked_to"));
  const from = timestampDate(req.ackedFrom);
  const to = timestampDate(req.ackedTo);
  if (to <= from) throw new DomainError("invalid_argument", "acked_to: must be after acked_from");
  const after = cursorOf(req.after);
  const page = await runSqlTransaction(
    deps.prisma,
    (tx) => requeueAckedRewardEntries(tx, { serverId, from, to, after, limit: REQUEUE_PAGE_ENTRIES, at: deps.now() }),
    { timeoutMs: REQUEUE_TRANSACTION_TIMEOUT_MS },
  );
  if (page.requeued > 0) deps.log.info({ serverId, requeued: page.requeued, scanned: page.scanned }, "reward entries re-queued");
  return create(RequeueRewardEntriesResponseSchema, {
    requeued: page.requeued,
    scanned: page.scanned,
    nextAfter: page.scanned === REQUEUE_PAGE_ENTRIES && page.last !== null ? requeueCursorText(page.last) : "",
  });
}
