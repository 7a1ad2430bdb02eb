import type { RewardPlayer } from "./reward-queue-store.js";

/** A counted heart, as the delivery consumer decoded it from `heart.counted`. */
export interface CountedHeart {
  heartId: string;
  serverId: string;
  voterIdentity: string;
  countedAt: Date;
  player: RewardPlayer;
}
