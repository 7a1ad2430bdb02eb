import type { SecretBox } from "../shared/secrets.js";
import type { Resolver } from "./send-callback.js";
import { sendVotifierVote, VOTIFIER_TIMEOUT_MS, VOTIFIER_VOTE_ADDRESS, votifierTargetName } from "./send-votifier.js";
import type { Transport } from "./transport.js";

/**
 * Votifier v2 as a transport: each counted heart becomes one vote with the
 * heart's username and its counted time (ms) as `timestamp`, so every retry of a
 * delivery carries the same vote. NuVotifier answers no status code: the attempt
 * log records the server's `cause: message` as the error.
 */
export function createVotifierTransport(deps: { secretBox: SecretBox; allowInsecure: boolean; timeoutMs?: number; resolve?: Resolver }): Transport {
  const timeoutMs = deps.timeoutMs ?? VOTIFIER_TIMEOUT_MS;
  return {
    async send(delivery) {
      const settings = delivery.votifier;
      if (!settings) return { kind: "held", reason: "Votifier is not configured" };
      const target = votifierTargetName(settings);
      let token: string;
      try {
        token = deps.secretBox.open(settings.sealedToken);
      } catch {
        // Failure policy: a token sealed under another SECRETS_KEY cannot be used; the attempt fails (retried) with a reason the owner can act on.
        return { kind: "failed", target, statusCode: null, latencyMs: 0, error: "the stored Votifier token cannot be decrypted: set the token again" };
      }
      const outcome = await sendVotifierVote(
        { host: settings.host, port: settings.port, token },
        { serviceName: settings.serviceName, username: delivery.username, address: VOTIFIER_VOTE_ADDRESS, timestamp: delivery.countedAt.getTime() },
        { timeoutMs, allowInsecure: deps.allowInsecure, ...(deps.resolve ? { resolve: deps.resolve } : {}) },
      );
      if (outcome.kind === "delivered") return { kind: "delivered", target, statusCode: null, latencyMs: outcome.latencyMs };
      return { kind: "failed", target, statusCode: null, latencyMs: outcome.latencyMs, error: outcome.error ?? "vote not acknowledged" };
    },
  };
}
