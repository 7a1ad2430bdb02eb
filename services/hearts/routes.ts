import { serverExists } from "../servers/server-exists.js";
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import {
  CastHeartResponseSchema,
  GetRankingResponseSchema,
  HeartService,
  HeartVerdict,
  RankingEntrySchema,
  type CastHeartRequest,
  type CastHeartResponse,
  type GetRankingRequest,
  type GetRankingResponse,
} from "../../gen/proto/hearts/v1/hearts_pb.js";
import { OWNER_SCOPE } from "../access/auth-interceptor.js";
import type { CoreDeps } from "../shared/deps.js";
import { DomainError, unknownServer } from "../shared/errors.js";
import { boundField } from "../shared/field-rules.js";
import { DEFAULT_FRAUD_RULES, type FraudRules } from "./domain/fraud-rules.js";
import { toVoterAddress } from "./domain/ip.js";
import { fraudWindows, scoreHeart } from "./domain/score-heart.js";
import { HEART_COOLDOWN_MS } from "./domain/streak.js";
import { isPeriod, periodOf } from "../shared/period.js";
import { getHeartStats } from "./heart-stats.js";
import { listHearts } from "./list-hearts.js";
import { countFraudSignals, countHeart, readRanking, recordFraudHeart, type HeartRecord } from "./store.js";

/** What HeartService needs: the core deps and, optionally, a fraud rule set (defaults otherwise). */
export type HeartRouteDeps = CoreDeps & { fraudRules?: FraudRules };

/** Ranking page size when the caller gives none, and the most one page may hold. */
export const DEFAULT_RANKING_LIMIT = 100;
export const MAX_RANKING_LIMIT = 1000;

/** Registers HeartService (CastHeart, GetRanking, ListHearts, GetHeartStats) on a Connect router. */
export function heartRoutes(deps: HeartRouteDeps): (router: ConnectRouter) => void {
  const rules = deps.fraudRules ?? DEFAULT_FRAUD_RULES;
  return (router) => {
    router.service(HeartService, {
      castHeart: (req) => castHeart(deps, rules, req),
      getRanking: (req, ctx) => getRanking(deps, req, ctx.values.get(OWNER_SCOPE)),
      listHearts: (req) => listHearts(deps, req),
      getHeartStats: (req) => getHeartStats(deps, req),
    });
  };
}

/**
 * Casts a heart: validate, score fraud on the counted signals, then let the
 * conditional upsert decide the 24 h cooldown. Every heart is recorded with its verdict.
 */
async function castHeart(deps: CoreDeps, rules: FraudRules, req: CastHeartRequest): Promise<CastHeartResponse> {
  const serverId = req.serverId.trim();
  if (serverId === "") throw new DomainError("invalid_argument", "server_id is required");
  // An empty username is a caller bug (400); a whitespace-only one is what a player typed and is scored as fraud.
  if (req.username === "") throw new DomainError("invalid_argument", "username is required");
  // Bounds come before fraud scoring: an over-long or NUL-holding value is refused, never stored (services/shared/field-rules.ts).
  const username = boundField("username", req.username);
  const voterIdentity = req.voterIdentity.trim();
  if (voterIdentity === "") throw new DomainError("invalid_argument", "voter_identity is required");
  boundField("voter_identity", voterIdentity);
  const userAgent = boundField("user_agent", req.userAgent);
  const address = toVoterAddress(boundField("ip", req.ip));
  if (address === null) throw new DomainError("invalid_argument", "ip must be an IPv4 or IPv6 address");
  if (!(await serverExists(deps.prisma, serverId))) {
    throw unknownServer();
  }

  const now = deps.now();
  const counts = await countFraudSignals(deps.prisma, {
    serverId,
    voterIdentity,
    ip: address.ip,
    subnet: address.subnet,
    windows: fraudWindows(rules, now),
  });
  const verdict = scoreHeart(rules, { username, userAgent }, counts);
  const heart: HeartRecord = {
    id: randomUUID(),
    serverId,
    username,
    voterIdentity,
    ip: address.ip,
    subnet: address.subnet,
    userAgent,
    fraudScore: verdict.score,
    fraudReasons: verdict.reasons,
    period: periodOf(now),
    at: now,
  };
  const base = { heartId: heart.id, fraudScore: verdict.score, fraudReasons: verdict.reasons, period: heart.period };

  if (verdict.blocked) {
    await recordFraudHeart(deps.prisma, heart);
    deps.log.info({ serverId, heartId: heart.id, score: verdict.score, reasons: verdict.reasons }, "heart blocked by fraud scoring");
    return create(CastHeartResponseSchema, {
      ...base,
      counted: false,
      verdict: HeartVerdict.FRAUD,
      reason: `blocked by fraud scoring (score ${verdict.score} >= ${rules.blockThreshold})`,
    });
  }

  const outcome = await countHeart(deps.prisma, heart);
  if (outcome.kind === "cooldown") {
    return create(CastHeartResponseSchema, {
      ...base,
      counted: false,
      verdict: HeartVerdict.COOLDOWN,
      reason: `cooldown until ${outcome.nextEligibleAt.toISOString()}`,
      nextEligibleAt: BigInt(Math.floor(outcome.nextEligibleAt.getTime() / 1000)),
    });
  }
  return create(CastHeartResponseSchema, {
    ...base,
    counted: true,
    verdict: HeartVerdict.COUNTED,
    reason: "counted",
    streakDay: outcome.streakDay,
    nextEligibleAt: BigInt(Math.floor((now.getTime() + HEART_COOLDOWN_MS) / 1000)),
  });
}

/** Lists servers by counted hearts in a UTC month (default: the current one). */
/** The servers ranked by counted hearts; for an owner's dashboard session (OWNER_SCOPE) only that owner's servers, with their overall rank. */
async function getRanking(deps: CoreDeps, req: GetRankingRequest, ownerId: string | undefined): Promise<GetRankingResponse> {
  const period = req.period.trim() === "" ? periodOf(deps.now()) : req.period.trim();
  if (!isPeriod(period)) throw new DomainError("invalid_argument", "period must be YYYY-MM");
  if (req.limit < 0) throw new DomainError("invalid_argument", "limit must not be negative");
  const limit = Math.min(req.limit === 0 ? DEFAULT_RANKING_LIMIT : req.limit, MAX_RANKING_LIMIT);
  const rows = await readRanking(deps.prisma, period, limit, ownerId);
  return create(GetRankingResponseSchema, {
    period,
    entries: rows.map((row) => create(RankingEntrySchema, { serverId: row.serverId, hearts: BigInt(row.hearts), rank: row.rank })),
  });
}
