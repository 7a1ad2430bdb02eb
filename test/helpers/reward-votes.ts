/**
 * Votes for the reward tests: a voter of their own address, a vote cast through CastHeart that must count, and a
 * counted heart as the delivery consumer's reward step gets it (to count into goals without the pipeline).
 */
import { randomUUID } from "node:crypto";
import type { TestStack } from "../../scripts/harness/stack.js";
import type { CountedHeart } from "../../services/rewards/counted-heart.js";
import { retryOverloaded } from "./retry-overloaded.js";

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
  const res = await retryOverloaded(() =>
    stack.clients.hearts.castHeart({
      serverId,
      voterIdentity: voter.identity,
      username: voter.username,
      ip: voter.ip,
      userAgent: "Mozilla/5.0 (X11; Linux x86_64) RewardTest/1.0",
      ...(voter.steamId ? { steamId: voter.steamId } : {}),
    }),
  );
  if (!res.counted) throw new Error(`the vote at ${at} did not count`);
  return res.heartId;
}

/**
 * The i-th counted heart of a batch on `serverId`: voter `<prefix>-voter-<i>` named `<name><i>`, counted i seconds
 * after `from` (ISO), a fresh heart id, no platform ids.
 */
export function countedHeart(q: { prefix: string; name: string; from: string }, i: number, serverId: string): CountedHeart {
  return {
    heartId: randomUUID(),
    serverId,
    voterIdentity: `${q.prefix}-voter-${i}`,
    countedAt: new Date(Date.parse(q.from) + i * 1000),
    player: { username: `${q.name}${i}`, steamId: null, discordId: null, minecraftUuid: null, accountId: null },
  };
}
