import type { SecretBox } from "../../shared/runtime/secrets.js";
import type { Resolver } from "./send-callback.js";
import type { AttemptExchange } from "./attempt-exchange.js";
import { sendVotifierVote, VOTIFIER_TIMEOUT_MS, VOTIFIER_VOTE_ADDRESS, votifierTargetName, type VotifierOutcome } from "./send-votifier.js";
import type { Transport } from "./transport.js";
import { votifierRefusal } from "../../shared/values/votifier-limits.js";

/**
 * Votifier v2 as a transport: each counted heart becomes one vote with the
 * heart's username and its counted time (ms) as `timestamp`, so every retry of a
 * delivery carries the same vote. NuVotifier answers no status code: the attempt
 * log records the server's `cause: message` as the error. A vote no listener can accept
 * (votifierRefusal: a username over 16 characters) fails for good on its first attempt,
 * without connecting.
 */
export function createVotifierTransport(deps: { secretBox: SecretBox; allowInsecure: boolean; timeoutMs?: number; resolve?: Resolver }): Transport {
  const timeoutMs = deps.timeoutMs ?? VOTIFIER_TIMEOUT_MS;
  return {
    async send(delivery) {
      const settings = delivery.votifier;
      if (!settings) return { kind: "held", reason: "Votifier is not configured" };
      const target = votifierTargetName(settings);
      const refusal = votifierRefusal({ username: delivery.username });
      if (refusal !== undefined) {
        // Failure policy: a vote every Votifier listener refuses (services/shared/values/votifier-limits.ts) is never sent nor retried:
        // failed for good at once, its reason in the attempt (shown on the dashboard); CastHeart told the list when it was cast.
        const error = `not sent: ${refusal}`;
        return {
          kind: "failed",
          final: true,
          target,
          statusCode: null,
          latencyMs: 0,
          error,
          exchange: toVotifierExchange(target, { latencyMs: 0, greeting: "", payload: "", answer: "" }, error),
        };
      }
      let token: string;
      try {
        token = deps.secretBox.open(settings.sealedToken);
      } catch {
        // Failure policy: a token sealed under another SECRETS_KEY cannot be used; the attempt fails (retried) with a reason the owner can act on.
        const error = "the stored Votifier token cannot be decrypted: set the token again";
        return {
          kind: "failed",
          target,
          statusCode: null,
          latencyMs: 0,
          error,
          exchange: toVotifierExchange(target, { latencyMs: 0, greeting: "", payload: "", answer: "" }, error),
        };
      }
      const outcome = await sendVotifierVote(
        { host: settings.host, port: settings.port, token },
        {
          serviceName: settings.serviceName,
          username: delivery.username,
          address: VOTIFIER_VOTE_ADDRESS,
          timestamp: delivery.countedAt.getTime(),
          // The only id NuVotifier's format has a field for (docs/votifier-and-pull.md); the others are not carried.
          ...(delivery.platformIds.minecraftUuid === null ? {} : { uuid: delivery.platformIds.minecraftUuid }),
        },
        { timeoutMs, allowInsecure: deps.allowInsecure, ...(deps.resolve ? { resolve: deps.resolve } : {}) },
      );
      if (outcome.kind === "delivered")
        return { kind: "delivered", target, statusCode: null, latencyMs: outcome.latencyMs, exchange: toVotifierExchange(target, outcome, null) };
      const error = outcome.error ?? "vote not acknowledged";
      return { kind: "failed", target, statusCode: null, latencyMs: outcome.latencyMs, error, exchange: toVotifierExchange(target, outcome, error) };
    },
  };
}

/**
 * A Votifier exchange for the attempt log: no headers and no status (the protocol has none); the
 * request body is the signed payload (never the token), the response the server's greeting and answer lines.
 */
function toVotifierExchange(
  target: string,
  outcome: Pick<VotifierOutcome, "latencyMs" | "greeting" | "payload" | "answer">,
  error: string | null,
): AttemptExchange {
  const lines = [outcome.greeting, outcome.answer].filter((line) => line !== "");
  return {
    target,
    request: { headers: {}, body: outcome.payload },
    response: lines.length === 0 ? null : { status: 0, headers: {}, body: lines.join("\n"), bodyTruncated: false },
    latencyMs: outcome.latencyMs,
    error,
    succeeded: error === null,
  };
}
