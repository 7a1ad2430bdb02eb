/** Votes for the reward tests: a voter of their own address, and a vote cast through CastHeart that must count. */
import type { TestStack } from "../../scripts/harness/stack.js";

/** A voter as CastHeart sees them. */
export interface RewardVoter {
  identity: string;
  username: string;
  ip: string;
  steamId?: string;
}

/**
 * Casts `voter`'s vote on `serverId` through CastHeart (the caller has set the stack's clock to its time, `at`) and
 * throws unless it counted. Returns the heart id.
 */
export async function castCountedVote(stack: TestStack, serverId: string, voter: RewardVoter, at: string): Promise<string> {
  const res = await stack.clients.hearts.castHeart({
    serverId,
    voterIdentity: voter.identity,
    username: voter.username,
    ip: voter.ip,
    userAgent: "Mozilla/5.0 (X11; Linux x86_64) RewardTest/1.0",
    ...(voter.steamId ? { steamId: voter.steamId } : {}),
  });
  if (!res.counted) throw new Error(`the vote at ${at} did not count`);
  return res.heartId;
}
