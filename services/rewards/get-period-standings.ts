import { create } from "@bufbuild/protobuf";
import {
  GetPeriodStandingsResponseSchema,
  PeriodStandingSchema,
  type GetPeriodStandingsRequest,
  type GetPeriodStandingsResponse,
} from "../../gen/proto/rewards/v1/rewards_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { sqlOf } from "../shared/adapters/sql/executor.js";
import { DomainError } from "../shared/rpc/errors.js";
import { monthOrWeekText, notNegativeText } from "../shared/values/contract.js";
import { PERIOD_CLOSED_TOP } from "../shared/values/event-types.js";
import { isoWeekRange, periodOf } from "../shared/values/period.js";
import { requireServerId } from "../servers/server-exists.js";
import { periodOfKind } from "./domain/period-awards.js";
import { MAX_PLACES } from "./domain/reward-rules.js";
import { readPeriodStandings } from "./period-store.js";

/**
 * GetPeriodStandings: the server's voters by counted votes in a UTC month or ISO week (default: the current month),
 * placed by the ranking's rule, top `limit` (default PERIOD_CLOSED_TOP, at most MAX_PLACES): exactly what the period's
 * close reads (readPeriodStandings) for its awards and its `period.closed` (counted for a server with reward rules).
 * The access table lets a server's owner ask for their own servers only.
 */
export async function getPeriodStandings(deps: CoreDeps, req: GetPeriodStandingsRequest): Promise<GetPeriodStandingsResponse> {
  const serverId = await requireServerId(deps, req.serverId);
  const key = req.period.trim() === "" ? periodOf(deps.now()) : req.period.trim();
  const period = periodOfKind(isoWeekRange(key) === null ? "month" : "week", key);
  if (period === null) throw new DomainError("invalid_argument", monthOrWeekText("period"));
  if (req.limit < 0) throw new DomainError("invalid_argument", notNegativeText("limit"));
  const top = Math.min(req.limit === 0 ? PERIOD_CLOSED_TOP : req.limit, MAX_PLACES);
  const standings = await readPeriodStandings(sqlOf(deps.prisma), { serverId, period, top });
  return create(GetPeriodStandingsResponseSchema, {
    period: period.period,
    standings: standings.map((s) => create(PeriodStandingSchema, { place: s.place, username: s.player.username, votes: s.votes })),
  });
}
