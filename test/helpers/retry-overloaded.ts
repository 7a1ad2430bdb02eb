import { Code, ConnectError } from "@connectrpc/connect";

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
