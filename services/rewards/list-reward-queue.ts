import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Prisma } from "../../gen/prisma/client.js";
import {
  ListRewardQueueResponseSchema,
  RewardQueueEntrySchema,
  type ListRewardQueueRequest,
  type ListRewardQueueResponse,
} from "../../gen/proto/rewards/v1/rewards_pb.js";
import type { ClaimKeyResolver } from "../claims/resolve-claim-key.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { runSql, sqlOf } from "../shared/adapters/sql/executor.js";
import { DomainError } from "../shared/rpc/errors.js";
import {
  DEFAULT_REWARD_QUEUE_PAGE,
  MAX_ONLINE_NAME_CHARS,
  MAX_ONLINE_PLAYERS,
  MAX_REWARD_QUEUE_PAGE,
  REWARD_QUEUE_PAGE_BYTES,
} from "../shared/values/reward-queue-limits.js";
import { takeQueuePayoutsSql, type WithdrawOthers } from "../payouts/write-payouts.js";
import { nextCheckSeconds } from "./domain/next-check.js";
import { resolveQueueServer } from "./resolve-queue-server.js";
import { closeRewardEntriesPaidElsewhere, findVoteEntriesPaidElsewhere, listPendingRewardEntries, type PendingRewardEntry } from "./reward-queue-store.js";

/** What ListRewardQueue needs beyond the core deps: the idle poll interval (REWARD_QUEUE_IDLE_CHECK_SECONDS), and pay-once's withdrawal. */
export interface ListRewardQueueDeps extends CoreDeps {
  idleCheckSeconds: number;
  withdrawOthers: WithdrawOthers;
}

/** The page size asked for: 1..MAX_REWARD_QUEUE_PAGE, 0 the default; invalid_argument otherwise. */
function pageOf(limit: number): number {
  if (limit === 0) return DEFAULT_REWARD_QUEUE_PAGE;
  if (limit < 1 || limit > MAX_REWARD_QUEUE_PAGE) throw new DomainError("invalid_argument", `limit: must be 1 to ${MAX_REWARD_QUEUE_PAGE}`);
  return limit;
}

/** The online players' names, trimmed, lower-cased and deduplicated; invalid_argument past the bounds. */
export function onlineNamesOf(names: readonly string[]): string[] {
  const lower = [...new Set(names.map((name) => name.trim().toLowerCase()).filter((name) => name !== ""))];
  if (lower.length > MAX_ONLINE_PLAYERS) throw new DomainError("invalid_argument", `online: at most ${MAX_ONLINE_PLAYERS} players per list`);
  if (lower.some((name) => name.length > MAX_ONLINE_NAME_CHARS))
    throw new DomainError("invalid_argument", `online: a name is longer than ${MAX_ONLINE_NAME_CHARS} characters`);
  return lower;
}

/** An entry's share of REWARD_QUEUE_PAGE_BYTES: its commands and player fields, plus a fixed allowance for the rest. */
function bytesOf(e: PendingRewardEntry): number {
  const texts = [...e.commands, e.player.username, e.player.steamId, e.player.discordId, e.player.minecraftUuid, e.player.accountId, e.reason];
  return texts.reduce((sum, text) => sum + Buffer.byteLength(text ?? "", "utf8") + 4, 64);
}

/** The longest prefix of `entries` within REWARD_QUEUE_PAGE_BYTES (the first entry always). */
function withinPageBytes(entries: PendingRewardEntry[]): PendingRewardEntry[] {
  let bytes = 0;
  const kept: PendingRewardEntry[] = [];
  for (const e of entries) {
    bytes += bytesOf(e);
    if (kept.length > 0 && bytes > REWARD_QUEUE_PAGE_BYTES) break;
    kept.push(e);
  }
  return kept;
}

/** When the server's newest heart was cast, or null when it has none. */
async function readLastVoteAt(deps: CoreDeps, serverId: string): Promise<Date | null> {
  // Bounded: one entry of hearts_server_id_created_at_id_idx (the newest).
  const [row] = await runSql<{ created_at: Date }>(
    deps.prisma,
    Prisma.sql`SELECT created_at FROM hearts WHERE server_id = ${serverId}::uuid ORDER BY created_at DESC LIMIT 1`,
  );
  return row?.created_at ?? null;
}

/**
 * Pay-once (servers.pay_once; docs/reward-queue.md "Pay-once"): the page's `vote` entries take their hearts' payouts for
 * the queue as they are listed to the plugin (`byPlugin`: by claim key) (takeQueuePayoutsSql, first come: the plugin runs what it is listed, so from here on no
 * other transport may pay them), and the entries whose heart another transport holds are left out: those it paid are
 * closed (acknowledged by the service, never listed again), those a push holds in flight or in doubt stay pending until
 * it settles (paid: closed; refused: listed again). The hearts taken are withdrawn from the other transports after it.
 * Two statements when the page holds a vote entry (none on a page without), one more only when something is closed.
 */
async function payOnceListed(deps: ListRewardQueueDeps, serverId: string, page: PendingRewardEntry[], byPlugin: boolean): Promise<PendingRewardEntry[]> {
  const votes = page.filter((e) => e.reason === "vote").map((e) => e.id);
  if (votes.length === 0) return page;
  const now = deps.now();
  // Only the plugin's list (by claim key) pays: an owner or admin looking at the queue by server id runs nothing, so
  // that view takes nothing and closes nothing; it only leaves out what another transport holds.
  const taken = byPlugin ? await runSql<{ heart_id: string }>(deps.prisma, takeQueuePayoutsSql(serverId, votes, now)) : [];
  const held = await findVoteEntriesPaidElsewhere(sqlOf(deps.prisma), { serverId, ids: votes });
  const paid = byPlugin ? held.filter((h) => h.state === "paid").map((h) => h.id) : [];
  await closeRewardEntriesPaidElsewhere(sqlOf(deps.prisma), { serverId, ids: paid, at: now });
  // After the taking statement, never inside it (as every payer does).
  if (taken.length > 0) await deps.withdrawOthers(deps.prisma, { serverId, heartIds: taken.map((r) => r.heart_id), paidBy: "queue", now }, deps.log);
  const out = new Set(held.map((h) => h.id));
  return page.filter((e) => !out.has(e.id));
}

/**
 * ListRewardQueue: the request's bounds (invalid_argument naming the field), the server (a wrong key: key_valid false and
 * nothing else read), a page of pending entries (reward-queue-store.ts listPendingRewardEntries: the whole queue, or with
 * `with_online` what the named players may be given), cut to REWARD_QUEUE_PAGE_BYTES, and when to list again (next-check.ts;
 * the server's newest heart is read only when the page is empty). Writes nothing, except in pay-once mode: a vote entry whose
 * heart another transport paid is closed instead of listed, and the listed ones take their hearts (payOnceListed).
 */
export async function listRewardQueue(deps: ListRewardQueueDeps, resolveKey: ClaimKeyResolver, req: ListRewardQueueRequest): Promise<ListRewardQueueResponse> {
  const limit = pageOf(req.limit);
  const online = req.withOnline ? onlineNamesOf(req.online) : undefined;
  if (!req.withOnline && req.online.length > 0) throw new DomainError("invalid_argument", "online: names players only with with_online");
  const serverId = await resolveQueueServer(deps, resolveKey, req);
  // A wrong key is told the idle interval: a misconfigured plugin does not poll fast.
  if (serverId === null) return create(ListRewardQueueResponseSchema, { keyValid: false, nextCheckSeconds: deps.idleCheckSeconds });
  const page = await listPendingRewardEntries(sqlOf(deps.prisma), { serverId, limit, ...(online ? { online } : {}) });
  const entries = await payOnceListed(deps, serverId, withinPageBytes(page), req.claimKey !== "");
  const pending = entries.length > 0;
  const lastVoteAt = pending ? null : await readLastVoteAt(deps, serverId);
  return create(ListRewardQueueResponseSchema, {
    keyValid: true,
    serverId,
    nextCheckSeconds: nextCheckSeconds({ pending, lastVoteAt, now: deps.now(), idleSeconds: deps.idleCheckSeconds }),
    entries: entries.map((e) =>
      create(RewardQueueEntrySchema, {
        id: e.id,
        reason: e.reason,
        username: e.player.username,
        steamId: e.player.steamId ?? "",
        discordId: e.player.discordId ?? "",
        minecraftUuid: e.player.minecraftUuid ?? "",
        accountId: e.player.accountId ?? "",
        commands: e.commands,
        onlineOnly: e.onlineOnly,
        createdAt: timestampFromDate(e.createdAt),
      }),
    ),
  });
}
