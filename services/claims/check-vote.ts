import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { CheckVoteResponseSchema, ClaimStatus, type CheckVoteRequest, type CheckVoteResponse } from "../../gen/proto/claims/v1/claims_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { toLedgerPlayer } from "./ledger-player.js";
import { readStanding, type LedgerHeart } from "./ledger-store.js";
import type { ClaimKeyResolver } from "./resolve-claim-key.js";

/** The answer's heart fields (shared by CheckVote and ClaimVote). */
export function heartFields(heart: LedgerHeart) {
  return {
    heartId: heart.heartId,
    votedAt: timestampFromDate(heart.countedAt),
    expiresAt: timestampFromDate(heart.expiresAt),
    claimedAt: heart.claimedAt ? timestampFromDate(heart.claimedAt) : undefined,
  };
}

/** The answer to each standing (ledger-store.ts readStanding): a push paying the latest heart right now reads as paid elsewhere. */
const CHECK_STATUS = {
  held: ClaimStatus.VOTED_UNCLAIMED,
  claimed: ClaimStatus.ALREADY_CLAIMED,
  paid_elsewhere: ClaimStatus.PAID_ELSEWHERE,
  push_in_flight: ClaimStatus.PAID_ELSEWHERE,
} as const;

/**
 * CheckVote: VOTED_UNCLAIMED (plugins' 1) when the player holds an unexpired unclaimed heart,
 * ALREADY_CLAIMED (2) when none is held and the player's latest payout within its window is this API's
 * claim, PAID_ELSEWHERE (0) when it was paid, or is being paid, by another transport (pay-once mode;
 * never a 2: EasyVoteExtended 3.2.x pays on a status 2 while a claim of its own is in doubt), else NOT_FOUND (0).
 * 1. the player id (invalid_argument naming the field; says nothing about the key);
 * 2. the key -> server (a wrong key: NOT_FOUND with key_valid false, nothing else read);
 * 3. one indexed read of the player's standing. Writes nothing.
 */
export async function checkVote(deps: CoreDeps, resolveKey: ClaimKeyResolver, req: CheckVoteRequest): Promise<CheckVoteResponse> {
  const player = toLedgerPlayer(req.player);
  const serverId = await resolveKey(req.claimKey);
  if (serverId === null) return create(CheckVoteResponseSchema, { status: ClaimStatus.NOT_FOUND, keyValid: false });
  const standing = await readStanding(deps.prisma, serverId, player, deps.now());
  const base = { keyValid: true, serverId };
  if (standing.kind === "none") return create(CheckVoteResponseSchema, { ...base, status: ClaimStatus.NOT_FOUND });
  return create(CheckVoteResponseSchema, { ...base, status: CHECK_STATUS[standing.kind], ...heartFields(standing.heart) });
}
