import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { CastHeartResponseSchema, HeartVerdict, type CastHeartRequest, type CastHeartResponse } from "../../gen/proto/hearts/v1/hearts_pb.js";
import type { CoreDeps } from "../shared/deps.js";
import { DomainError } from "../shared/errors.js";
import { boundField } from "../shared/field-rules.js";
import { periodOf } from "../shared/period.js";
import { serverExists } from "../servers/server-exists.js";
import type { FraudRules } from "./domain/fraud-rules.js";
import { toVoterAddress } from "./domain/ip.js";
import { fraudWindows, scoreHeart } from "./domain/score-heart.js";
import { HEART_COOLDOWN_MS } from "./domain/streak.js";
import { countFraudSignals, countHeart, recordFraudHeart, type HeartRecord } from "./store.js";

/**
 * Casts a heart: validate, score fraud on the counted signals, then let the
 * conditional upsert decide the 24 h cooldown. Every heart is recorded with its verdict.
 */
export async function castHeart(deps: CoreDeps, rules: FraudRules, req: CastHeartRequest): Promise<CastHeartResponse> {
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
    throw new DomainError("unknown_server", "unknown server");
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
