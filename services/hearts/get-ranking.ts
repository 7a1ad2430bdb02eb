import { create } from "@bufbuild/protobuf";
import { GetRankingResponseSchema, RankingEntrySchema, type GetRankingRequest, type GetRankingResponse } from "../../gen/proto/hearts/v1/hearts_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError } from "../shared/rpc/errors.js";
import { isPeriod, periodOf } from "../shared/values/period.js";
import { readRanking } from "./store.js";
import { monthText, notNegativeText } from "../shared/values/contract.js";

/** Ranking page size when the caller gives none, and the most one page may hold. */
export const DEFAULT_RANKING_LIMIT = 100;
export const MAX_RANKING_LIMIT = 1000;

/**
 * GetRanking: servers by counted hearts in a UTC month (default: the current one); for an
 * owner's dashboard session (OWNER_SCOPE) only that owner's servers, with their overall rank.
 */
export async function getRanking(deps: CoreDeps, req: GetRankingRequest, ownerId: string | undefined): Promise<GetRankingResponse> {
  const period = req.period.trim() === "" ? periodOf(deps.now()) : req.period.trim();
  if (!isPeriod(period)) throw new DomainError("invalid_argument", monthText("period"));
  if (req.limit < 0) throw new DomainError("invalid_argument", notNegativeText("limit"));
  const limit = Math.min(req.limit === 0 ? DEFAULT_RANKING_LIMIT : req.limit, MAX_RANKING_LIMIT);
  const rows = await readRanking(deps.prisma, period, limit, ownerId);
  return create(GetRankingResponseSchema, {
    period,
    entries: rows.map((row) => create(RankingEntrySchema, { serverId: row.serverId, hearts: BigInt(row.hearts), rank: row.rank })),
  });
}
