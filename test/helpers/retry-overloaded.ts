import { randomBytes } from "node:crypto";
import { type Client, Code, ConnectError } from "@connectrpc/connect";
import type { HeartService } from "../../gen/proto/hearts/v1/hearts_pb.js";

/** Most retries of one call: past the admission bound on every try for this long, the machine is not merely loaded. */
const MAX_RETRIES = 30;

/**
 * Runs `call`, and runs it again while it is refused as overloaded (resource_exhausted with `x-error-kind: overloaded`:
 * the service's admission bound refused it and wrote nothing), after the refusal's Retry-After hint, as a client does.
 * On a loaded test machine one cast may wait past the admission bound (a CI run beside other work saw a single
 * CastHeart refused so). Any other error, and the last refusal, is the caller's.
 */
export async function retryOverloaded<T>(call: () => Promise<T>): Promise<T> {
  for (let retry = 0; ; retry++) {
    try {
      return await call();
    } catch (error) {
      const refusal = ConnectError.from(error);
      if (retry >= MAX_RETRIES || refusal.code !== Code.ResourceExhausted || refusal.metadata.get("x-error-kind") !== "overloaded") throw error;
      const afterSeconds = Number(refusal.metadata.get("retry-after") ?? "1");
      await new Promise((resolve) => setTimeout(resolve, Math.min(5, Number.isFinite(afterSeconds) ? afterSeconds : 1) * 1000));
    }
  }
}

/** A vote to cast from a fresh voter identity (castFreshCountedHeart). */
export interface FreshVote {
  serverId: string;
  username: string;
  ip: string;
  userAgent: string;
}

/** Casts `vote` through CastHeart from a fresh voter identity, retrying an overloaded refusal; throws unless it counted. Its heart id. */
export async function castFreshCountedHeart(hearts: Client<typeof HeartService>, vote: FreshVote): Promise<string> {
  const cast = await retryOverloaded(() => hearts.castHeart({ ...vote, voterIdentity: `voter-${randomBytes(4).toString("hex")}` }));
  if (!cast.counted) throw new Error(`heart did not count: ${cast.reason}`);
  return cast.heartId;
}
