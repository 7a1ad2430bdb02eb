import { create } from "@bufbuild/protobuf";
import { GetRankingResponseSchema, RankingEntrySchema, type GetRankingRequest, type GetRankingResponse } from "../../gen/proto/hearts/v1/hearts_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError, unknownServer } from "../shared/rpc/errors.js";
import { isoWeekRange, isPeriod, periodOf } from "../shared/values/period.js";
import { sqlOf } from "../shared/adapters/sql/executor.js";
import { readRanking } from "./store.js";
import { monthOrWeekText, monthText, notNegativeText } from "../shared/values/contract.js";
import { requireServer } from "../servers/server-exists.js";
import { periodOfKind } from "../rewards/domain/period-awards.js";
import { readPeriodStandings } from "../rewards/period-store.js";

/** Ranking page size when the caller gives none, and the most one page may hold. */
export const DEFAULT_RANKING_LIMIT = 100;
export const MAX_RANKING_LIMIT = 1000;

/**
 * GetRanking: servers by counted hearts in a UTC month (default: the current one); for an
 * owner's dashboard session (OWNER_SCOPE) only that owner's servers, with their overall rank.
 */
export async function getRanking(deps: CoreDeps, req: GetRankingRequest, ownerId: string | undefined): Promise<GetRankingResponse> {
  const period = req.period.trim() === "" ? periodOf(deps.now()) : req.period.trim();
  if (req.limit < 0) throw new DomainError("invalid_argument", notNegativeText("limit"));
  const limit = Math.min(req.limit === 0 ? DEFAULT_RANKING_LIMIT : req.limit, MAX_RANKING_LIMIT);
  if (req.serverId.trim() !== "") return getVoterRanking(deps, { serverId: req.serverId, period, limit }, ownerId);
  if (!isPeriod(period)) throw new DomainError("invalid_argument", monthText("period"));
  const rows = await readRanking(deps.prisma, period, limit, ownerId);
  return create(GetRankingResponseSchema, {
    period,
    entries: rows.map((row) => create(RankingEntrySchema, { serverId: row.serverId, hearts: BigInt(row.hearts), rank: row.rank })),
  });
}

/**
 * GetRanking with a server_id: the server's voters by counted votes in a UTC month or ISO week, placed by the ranking's
 * rule (rankByCountSql), the same standings its period awards and `period.closed` use (readPeriodStandings, counted
 * for a server with reward rules). An owner's session sees only their own servers (another's answers unknown server).
 */
async function getVoterRanking(
  deps: CoreDeps,
  q: { serverId: string; period: string; limit: number },
  ownerId: string | undefined,
): Promise<GetRankingResponse> {
  const period = periodOfKind(isoWeekRange(q.period) === null ? "month" : "week", q.period);
  if (period === null) throw new DomainError("invalid_argument", monthOrWeekText("period"));
  const serverId = await requireServer(deps, q.serverId);
  if (ownerId !== undefined && (await deps.prisma.server.count({ where: { id: serverId, ownerId } })) !== 1) throw unknownServer();
  const standings = await readPeriodStandings(sqlOf(deps.prisma), { serverId, period, top: q.limit });
  return create(GetRankingResponseSchema, {
    period: period.period,
    entries: standings.map((s) => create(RankingEntrySchema, { serverId, hearts: BigInt(s.votes), rank: s.place, username: s.player.username })),
  });
}
