import { renderCommand } from "./render-command.js";
import type { Reward, RewardRules } from "./reward-rules.js";
import type { RewardEntry, SkippedReward } from "./rewards-for-vote.js";

/** The two players of a referral: the referrer (who shared the link) and the referee (who joined through it). */
export type ReferralSide = "referrer" | "referee";

/** Why a referral's entries are given: it qualified (`referral`), or it was clawed back after its lock (`reversal`). */
export type ReferralRewardReason = "referral" | "reversal";

/** One side's entries: the player they are for (the identity the game server sent) and the entries. */
export interface ReferralSideEntries {
  side: ReferralSide;
  /** The player's identity on the game server (the referral's referrer or referee identity): `{player}`. */
  player: string;
  entries: RewardEntry[];
  skipped: SkippedReward[];
}

/**
 * The idempotent key of a referral's entry: `<referral id>:<reason>:<side>:<rule index>`. The same referral always gives
 * the same keys, so a redelivered `referral.qualified` (or an owner's approval racing it) queues nothing twice.
 */
export function referralEntryKey(referralId: string, reason: ReferralRewardReason, side: ReferralSide, index: number): string {
  return `${referralId}:${reason}:${side}:${index}`;
}

/**
 * What a referral gives under `rules` (issue 31): on `referral`, the referrer's and the referee's rewards
 * (`referral.referrer`, `referral.referee`); on `reversal`, the reversal commands (`referral.reversal.*`). Each side's
 * commands name that side's player as `{player}`; a reward whose identity cannot be put in a command safely is skipped
 * (as a vote's). Pure and deterministic.
 */
export function rewardsForReferral(
  rules: RewardRules,
  referral: { referralId: string; referrer: string; referee: string },
  reason: ReferralRewardReason,
): ReferralSideEntries[] {
  const lists = reason === "referral" ? rules.referral : rules.referral.reversal;
  return (["referrer", "referee"] as const).map((side) => {
    const player = referral[side];
    const entries: RewardEntry[] = [];
    const skipped: SkippedReward[] = [];
    lists[side].forEach((reward: Reward, i) => {
      const key = referralEntryKey(referral.referralId, reason, side, i);
      const commands: string[] = [];
      for (const template of reward.commands) {
        const rendered = renderCommand(template, { player });
        if (!rendered.ok) {
          skipped.push({ key, reason, why: rendered.why });
          return;
        }
        commands.push(rendered.command);
      }
      entries.push({ key, reason, commands, onlineOnly: reward.onlineOnly });
    });
    return { side, player, entries, skipped };
  });
}

/**
 * Every key a referral's `referral` entries can have (each side, every rule index up to `maxEntries`): what the clawback
 * looks up to learn whether the referral paid anything (its rules may have changed since).
 */
export function allReferralEntryKeys(referralId: string, maxEntries: number): string[] {
  return (["referrer", "referee"] as const).flatMap((side) => Array.from({ length: maxEntries }, (_, i) => referralEntryKey(referralId, "referral", side, i)));
}

/**
 * Every key a referral's entries of either reason can have, for one side (every rule index up to `maxEntries`): what a
 * voter's erasure deletes for the side that was the voter.
 */
export function referralSideEntryKeys(referralId: string, side: ReferralSide, maxEntries: number): string[] {
  return (["referral", "reversal"] as const).flatMap((reason) => Array.from({ length: maxEntries }, (_, i) => referralEntryKey(referralId, reason, side, i)));
}
