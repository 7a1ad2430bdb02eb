import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { Prisma } from "../../gen/prisma/client.js";
import {
  DeleteNetworkGoalResponseSchema,
  GetNetworkGoalResponseSchema,
  type GetNetworkGoalResponse,
  ListNetworkGoalsResponseSchema,
  NetworkGoalService,
  PutNetworkGoalResponseSchema,
} from "../../gen/proto/rewards/v1/rewards_pb.js";
import { UNKNOWN_OWNER_TEXT } from "../alerts/manage-alerts.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { runSql, runSqlTransaction, sqlOf } from "../shared/adapters/sql/executor.js";
import { DomainError, unknownServer } from "../shared/rpc/errors.js";
import { CALLER_PRINCIPAL, OWNER_SCOPE } from "../shared/rpc/interceptors.js";
import { betweenText } from "../shared/values/contract.js";
import { isUuid, NIL_UUID } from "../shared/values/ids.js";
import { decodePageCursor, encodePageCursor } from "../shared/values/page-cursor.js";
import { parseNetworkGoal } from "./domain/network-goal.js";
import {
  deleteNetworkGoal,
  dropCountingRoundVoters,
  insertNetworkGoal,
  listNetworkGoals,
  type ReadGoal,
  readNetworkGoal,
  replaceNetworkGoal,
} from "./network-goal-store.js";

/** The text of a goal that does not exist, or that an owner session may not see (the same answer, so it learns nothing). */
export const UNKNOWN_GOAL_TEXT = "unknown goal";

/** A goal's saves are short: a few rows (its servers) in one transaction. */
const SAVE_TRANSACTION = { timeoutMs: 10_000, maxWaitMs: 5_000 };
/** A deletion's transaction is two statements (the goal marked deleted, its unpaid rounds counted). */
const DELETE_TRANSACTION = { timeoutMs: 10_000, maxWaitMs: 5_000 };
/** Voters one statement of a deletion removes at most. */
const DELETE_VOTERS_PAGE = 1_000;
/** Goals a ListNetworkGoals page holds by default, and at most (each with its servers and its newest round). */
export const DEFAULT_GOALS_PAGE = 50;
export const MAX_GOALS_PAGE = 100;

/**
 * The owner of the chosen servers, who the goal belongs to. A server that does not exist, or (for an owner's session)
 * is not the session owner's, is `unknown server`, exactly as a missing one; a list admin's servers must share one
 * owner (a goal is one owner's, across their servers).
 */
async function ownerOfServers(deps: CoreDeps, serverIds: readonly string[], session: string | undefined): Promise<string | null> {
  // Bounded: at most MAX_GOAL_SERVERS servers by primary key.
  const rows = await runSql<{ id: string; owner_id: string | null }>(
    deps.prisma,
    Prisma.sql`SELECT id::text, owner_id FROM servers WHERE id = ANY(${[...serverIds]}::uuid[])`,
  );
  if (rows.length !== serverIds.length) throw unknownServer();
  if (session !== undefined) {
    if (rows.some((r) => r.owner_id !== session)) throw unknownServer();
    return session;
  }
  const owners = new Set(rows.map((r) => r.owner_id));
  if (owners.size > 1) throw new DomainError("invalid_argument", "server_ids: the servers have different owners; a goal counts one owner's servers");
  return rows[0]?.owner_id ?? null;
}

/** The goal `rawId`, when it exists and the caller may see it; `not_found` (unknown goal) otherwise. */
async function requireGoal(deps: CoreDeps, rawId: string, ctx: HandlerContext) {
  const id = rawId.trim().toLowerCase();
  const goal = isUuid(id) ? await readNetworkGoal(sqlOf(deps.prisma), id) : null;
  const session = ctx.values.get(OWNER_SCOPE);
  if (goal === null || goal.deletedAt !== null || (session !== undefined && goal.ownerId !== session)) throw new DomainError("not_found", UNKNOWN_GOAL_TEXT);
  return goal;
}

/** The owner whose goals a list shows: the session's own (another named is `unknown owner`), or the one a token names (empty: none). */
function listedOwner(ctx: HandlerContext, requested: string): string | null {
  const session = ctx.values.get(OWNER_SCOPE);
  if (session === undefined) return requested === "" ? null : requested;
  if (requested !== "" && requested !== session) throw new DomainError("not_found", UNKNOWN_OWNER_TEXT);
  return session;
}

/** A goal as Get and List answer it. */
function toGoalResponse(goal: ReadGoal): GetNetworkGoalResponse {
  return create(GetNetworkGoalResponseSchema, {
    goalId: goal.id,
    name: goal.name,
    serverIds: goal.serverIds,
    target: goal.target,
    payees: goal.payees,
    rewardsJson: JSON.stringify(goal.rewards),
    round: goal.round,
    progress: goal.progress,
    reached: goal.reached,
    ...(goal.lastReachedAt ? { lastReachedAt: timestampFromDate(goal.lastReachedAt) } : {}),
  });
}

/**
 * Registers NetworkGoalService (issue 31, network goals; docs/reward-rules.md "Network goals"): goals validated by
 * services/rewards/domain/network-goal.ts and saved by network-goal-store.ts. Access (services/access/rpc-access.ts,
 * policy `own`): admin tokens save and delete on any servers that share one owner, read tokens read and list any
 * owner's goals; an owner's session saves, reads, lists and deletes only goals over servers it owns (another owner's
 * server or goal is not_found, as a missing one).
 */
export function networkGoalRoutes(deps: CoreDeps): (router: ConnectRouter) => void {
  return (router) => {
    router.service(NetworkGoalService, {
      async putNetworkGoal(req, ctx) {
        const parsed = parseNetworkGoal({ name: req.name, serverIds: req.serverIds, target: req.target, payees: req.payees, rewardsJson: req.rewardsJson });
        if (!parsed.ok) throw new DomainError("invalid_argument", parsed.errors.join("; "));
        const goal = parsed.goal;
        const session = ctx.values.get(OWNER_SCOPE);
        if (req.goalId.trim() !== "") await requireGoal(deps, req.goalId, ctx);
        const ownerId = await ownerOfServers(deps, goal.serverIds, session);
        const at = deps.now();
        const goalId = await runSqlTransaction(
          deps.prisma,
          async (tx) => {
            if (req.goalId.trim() === "") return insertNetworkGoal(tx, { goal, ownerId, by: ctx.values.get(CALLER_PRINCIPAL), at });
            const id = req.goalId.trim().toLowerCase();
            if (!(await replaceNetworkGoal(tx, { id, goal, ownerId, at }))) throw new DomainError("not_found", UNKNOWN_GOAL_TEXT);
            return id;
          },
          SAVE_TRANSACTION,
        );
        deps.log.info({ goalId, servers: goal.serverIds.length, target: goal.target, payees: goal.payees }, "network goal saved");
        return create(PutNetworkGoalResponseSchema, { goalId });
      },
      async getNetworkGoal(req, ctx) {
        return toGoalResponse(await requireGoal(deps, req.goalId, ctx));
      },
      async listNetworkGoals(req, ctx) {
        const ownerId = listedOwner(ctx, req.ownerId.trim());
        if (!Number.isInteger(req.limit) || req.limit < 0 || req.limit > MAX_GOALS_PAGE)
          throw new DomainError("invalid_argument", betweenText("limit", 1, MAX_GOALS_PAGE));
        const limit = req.limit === 0 ? DEFAULT_GOALS_PAGE : req.limit;
        const after = req.cursor === "" ? { createdAt: new Date(0), id: NIL_UUID } : decodePageCursor(req.cursor);
        // A keyset page: at most `limit` goals (listNetworkGoals states the rows read), then the next page's position.
        const goals = await listNetworkGoals(sqlOf(deps.prisma), { ownerId, after, limit });
        const last = goals[goals.length - 1];
        const nextCursor = goals.length === limit && last !== undefined ? encodePageCursor({ createdAt: last.createdAt, id: last.id }) : "";
        return create(ListNetworkGoalsResponseSchema, { goals: goals.map(toGoalResponse), nextCursor });
      },
      async deleteNetworkGoal(req, ctx) {
        const goal = await requireGoal(deps, req.goalId, ctx);
        const deleted = await runSqlTransaction(deps.prisma, (tx) => deleteNetworkGoal(tx, { id: goal.id, at: deps.now() }), DELETE_TRANSACTION);
        // Deleted meanwhile by another call: the same answer as a goal that is gone.
        if (deleted === null) throw new DomainError("not_found", UNKNOWN_GOAL_TEXT);
        // After the deletion committed, outside its transaction: a large round's voters go page by page, holding no
        // lock (a count waiting on the goal's lock is not kept waiting for them). A failure here throws; the goal is
        // deleted all the same, and the round's voters left are a voter's to erase like any other.
        await dropCountingRoundVoters(sqlOf(deps.prisma), { goalId: goal.id, round: deleted.round, pageVoters: DELETE_VOTERS_PAGE });
        deps.log.info({ goalId: goal.id, unpaidRounds: deleted.unpaidRounds }, "network goal deleted");
        return create(DeleteNetworkGoalResponseSchema, { unpaidRounds: deleted.unpaidRounds });
      },
    });
  };
}
