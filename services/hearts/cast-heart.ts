import { create } from "@bufbuild/protobuf";
import {
  CastHeartResponseSchema,
  HeartVerdict,
  UndeliverableTransportSchema,
  type CastHeartRequest,
  type CastHeartResponse,
  type UndeliverableTransport,
} from "../../gen/proto/hearts/v1/hearts_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError, unknownServer } from "../shared/rpc/errors.js";
import { boundField } from "../shared/values/field-rules.js";
import { toPlatformIds } from "../shared/values/player-ids.js";
import type { GroupCommit } from "../shared/runtime/group-commit.js";
import { isUuid } from "../shared/values/ids.js";
import type { HeartCast, HeartCastResult } from "./cast-heart-batch.js";
import type { FraudRules } from "./domain/fraud-rules.js";
import { toVoterAddress } from "./domain/ip.js";
import { HEART_COOLDOWN_MS } from "./domain/streak.js";
import { requiredText } from "../shared/values/contract.js";
import { VOTIFIER_TRANSPORT_NAME, votifierRefusal } from "../shared/values/votifier-limits.js";
import type { ReceiptLinks } from "./receipt-token.js";

/**
 * Casts a heart: validate, then hand it to the CastHeart group commit (cast-heart-batch.ts),
 * which scores fraud on the counted signals and lets the conditional upsert decide the
 * 24 h cooldown. Every heart is recorded with its verdict. Beyond capacity the queue
 * refuses with `Overloaded` (resource_exhausted, retry hint; nothing written). The answer names
 * the server's transports that can never carry the heart (`undeliverable`), so the list learns it
 * when the heart is cast, not when its delivery fails. Every answer carries the heart's receipt URL
 * (receipt-token.ts), which the list shows the voter.
 */
export async function castHeart(
  deps: CoreDeps,
  rules: FraudRules,
  queue: GroupCommit<HeartCast, HeartCastResult>,
  receipts: ReceiptLinks,
  req: CastHeartRequest,
): Promise<CastHeartResponse> {
  const serverId = req.serverId.trim();
  if (serverId === "") throw new DomainError("invalid_argument", requiredText("server_id"));
  // An empty username is a caller bug (400); a whitespace-only one is what a player typed and is scored as fraud.
  if (req.username === "") throw new DomainError("invalid_argument", requiredText("username"));
  // Bounds come before fraud scoring: an over-long or NUL-holding value is refused, never stored (services/shared/values/field-rules.ts).
  const username = boundField("username", req.username);
  const voterIdentity = req.voterIdentity.trim();
  if (voterIdentity === "") throw new DomainError("invalid_argument", requiredText("voter_identity"));
  boundField("voter_identity", voterIdentity);
  const userAgent = boundField("user_agent", req.userAgent);
  const address = toVoterAddress(boundField("ip", req.ip));
  if (address === null) throw new DomainError("invalid_argument", "ip must be an IPv4 or IPv6 address");
  // Optional platform ids: format-checked and normalised in their one home (services/shared/values/player-ids.ts).
  const ids = toPlatformIds(req);
  // An id that is not a uuid names no server: answered here, without a database round trip (as serverExists does).
  if (!isUuid(serverId)) throw unknownServer();

  const outcome = await queue.submit({ serverId, username, voterIdentity, userAgent, address, ids, at: deps.now() });
  const { heart } = outcome;
  const now = heart.at;
  const undeliverable = await findUndeliverable(deps, serverId, username);
  const base = {
    heartId: heart.id,
    fraudScore: heart.fraudScore,
    fraudReasons: heart.fraudReasons,
    period: heart.period,
    undeliverable,
    receiptUrl: receipts.urlOf(heart.id),
  };

  if (outcome.kind === "fraud") {
    deps.log.info({ serverId, heartId: heart.id, score: heart.fraudScore, reasons: heart.fraudReasons }, "heart blocked by fraud scoring");
    return create(CastHeartResponseSchema, {
      ...base,
      counted: false,
      verdict: HeartVerdict.FRAUD,
      reason: `blocked by fraud scoring (score ${heart.fraudScore} >= ${rules.blockThreshold})`,
    });
  }
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

/**
 * The server's transports that can never carry a heart of this username (CastHeartResponse.undeliverable).
 * The rule is pure (services/shared/values/votifier-limits.ts, also what the Votifier transport applies); the
 * server's Votifier setting is read only when the rule refuses the name, so an ordinary cast costs no
 * extra statement. A server has the Votifier transport when its host is set, as the delivery store
 * decides (a Votifier delivery is stored for every counted heart then).
 */
async function findUndeliverable(deps: CoreDeps, serverId: string, username: string): Promise<UndeliverableTransport[]> {
  const refusal = votifierRefusal({ username });
  if (refusal === undefined) return [];
  try {
    const server = await deps.prisma.server.findUnique({ where: { id: serverId }, select: { votifierHost: true } });
    return server?.votifierHost ? [create(UndeliverableTransportSchema, { transport: VOTIFIER_TRANSPORT_NAME, reason: refusal })] : [];
  } catch (error) {
    // Failure policy: the heart is already recorded; answering an error would make the caller cast it again. Only the early
    // notice is lost: the Votifier delivery still fails at once with the same reason, shown on the dashboard.
    deps.log.warn({ err: error, serverId }, "could not read the server's Votifier setting for CastHeart's undeliverable list");
    return [];
  }
}
