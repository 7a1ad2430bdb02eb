import { setTimeout as delay } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { ClaimStatus, ClaimVoteResponseSchema, type ClaimVoteRequest, type ClaimVoteResponse } from "../../gen/proto/claims/v1/claims_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DependencyUnavailable, Overloaded } from "../shared/rpc/errors.js";
import { heartFields } from "./check-vote.js";
import { toLedgerPlayer } from "./ledger-player.js";
import { claimOldestHeld, readStanding } from "./ledger-store.js";
import type { ClaimKeyResolver } from "./resolve-claim-key.js";
import type { WithdrawOthers } from "../payouts/write-payouts.js";

/** Claim attempts that may find the heart they aimed at taken by a concurrent claim while another is still held. */
const MAX_CLAIM_ATTEMPTS = 3;
/** The retry hint when they all did. */
const CLAIM_RETRY_AFTER_MS = 100;
/**
 * How long a claim waits for a push that is paying the player's latest heart (pay-once mode) to end,
 * before it answers "try again" (503 with Retry-After). It re-reads the standing at PUSH_WAIT_STEPS_MS,
 * so a waiting claim makes at most PUSH_WAIT_STEPS_MS.length + 1 indexed reads.
 */
const PUSH_WAIT_STEPS_MS = [50, 100, 200, 300, 400, 500, 500, 500, 500, 500];
/** The retry hint of a claim that waited for a push in vain: about one callback attempt. */
const PUSH_IN_FLIGHT_RETRY_AFTER_MS = 5_000;
/** What a claim that waited for a push in vain is told (503 at the gateway: every plugin reads it as "failed, try again"). */
const PUSH_IN_FLIGHT_TEXT = "the vote's payout is in progress through another transport; retry after the Retry-After delay";

/**
 * ClaimVote's deps: the core ones, what withdraws a heart the claim paid from the other transports (pay-once mode;
 * services/delivery/pipeline/withdraw-unpaid.ts, passed in by the wiring), and the pause of a claim waiting for a push (tests may step it).
 */
export type ClaimVoteDeps = CoreDeps & { withdrawOthers: WithdrawOthers; sleep?: (ms: number) => Promise<unknown> };

/**
 * ClaimVote: claims the player's OLDEST held heart atomically -> CLAIMED_NOW (plugins' 1); with
 * none held, the player's latest payout decides: this API's own claim -> ALREADY_CLAIMED (2, never 0:
 * a plugin that lost its first answer must be able to tell); another transport's payment (pay-once
 * mode) -> PAID_ELSEWHERE (0: nothing to pay, never a 2 a plugin could pay on after a failed claim);
 * a push paying it right now -> wait for its outcome (bounded), then answer from it, or refuse with a
 * retry hint (503) while it is still in doubt; nothing -> NOT_FOUND (0). Of concurrent claims of one
 * held heart exactly one answers CLAIMED_NOW, the others ALREADY_CLAIMED.
 * 1. the player id; 2. the key -> server (wrong key: NOT_FOUND, key_valid false);
 * 3. the conditional claim; when it took nothing, the standing says 2, 0, wait, or that a heart is still held: claim again.
 */
export async function claimVote(deps: ClaimVoteDeps, resolveKey: ClaimKeyResolver, req: ClaimVoteRequest): Promise<ClaimVoteResponse> {
  const player = toLedgerPlayer(req.player);
  const serverId = await resolveKey(req.claimKey);
  if (serverId === null) return create(ClaimVoteResponseSchema, { status: ClaimStatus.NOT_FOUND, keyValid: false });
  const base = { keyValid: true, serverId };
  let waits = 0;
  for (let attempt = 1; ; attempt++) {
    const now = deps.now();
    const claimed = await claimOldestHeld(deps.prisma, serverId, player, now);
    if (claimed !== null) {
      // Pay-once mode: the claim paid the heart; its waiting pushes and pull delivery are withdrawn (deps.withdrawOthers).
      if (claimed.payOnce) await deps.withdrawOthers(deps.prisma, { serverId, heartIds: [claimed.heartId], paidBy: "claim", now }, deps.log);
      return create(ClaimVoteResponseSchema, { ...base, status: ClaimStatus.CLAIMED_NOW, ...heartFields(claimed) });
    }
    const standing = await readStanding(deps.prisma, serverId, player, now);
    if (standing.kind === "none") return create(ClaimVoteResponseSchema, { ...base, status: ClaimStatus.NOT_FOUND });
    if (standing.kind === "claimed") return create(ClaimVoteResponseSchema, { ...base, status: ClaimStatus.ALREADY_CLAIMED, ...heartFields(standing.heart) });
    if (standing.kind === "paid_elsewhere")
      return create(ClaimVoteResponseSchema, { ...base, status: ClaimStatus.PAID_ELSEWHERE, ...heartFields(standing.heart) });
    if (standing.kind === "push_in_flight") {
      // Failure policy: the push's outcome decides (paid: 0; given back: the next round claims it); still in doubt after the
      // bounded wait: refuse with a retry hint (nothing claimed; every plugin reads a non-200 as "failed, pay nothing").
      const step = PUSH_WAIT_STEPS_MS[waits++];
      if (step === undefined) throw new DependencyUnavailable(PUSH_IN_FLIGHT_RETRY_AFTER_MS, PUSH_IN_FLIGHT_TEXT);
      await (deps.sleep ?? delay)(step);
      attempt = 0;
      continue;
    }
    // Failure policy: a heart still held after a claim took nothing was counted between the two statements; claim
    // again a bounded number of times, then refuse as overloaded (nothing claimed; the plugin polls again), never a 2 it might pay on.
    if (attempt >= MAX_CLAIM_ATTEMPTS) throw new Overloaded(CLAIM_RETRY_AFTER_MS);
  }
}
