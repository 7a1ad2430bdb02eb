import type { AttemptExchange } from "../pipeline/attempt-exchange.js";
import { sendCallback, toHttpExchange } from "../pipeline/send-callback.js";
import { loadNewestReferralSecret } from "../../servers/active-secrets.js";
import { ERROR_TEXT, INGEST_PATH, isReferralEventName } from "../../shared/values/contract.js";
import type { CoreDeps } from "../../shared/adapters/deps.js";
import { DomainError } from "../../shared/rpc/errors.js";
import { canonicalString, formatIngestSignature } from "../../shared/values/signature.js";

/** What sending a test referral event needs beyond the core deps. */
export interface SendTestReferralEventDeps extends CoreDeps {
  /** Timeout of the test request (the same as real callbacks: CALLBACK_TIMEOUT_MS). */
  callbackTimeoutMs: number;
  /** The public gateway's base URL the event is posted to (for example https://refer.example.com). */
  publicBaseUrl: string;
}

/**
 * Signs a `test: true` referral event (`registered` when `rawEvent` is blank) with the server's newest
 * active referral secret and posts it to the service's own public ingest endpoint, as an integrator
 * would; returns the exact exchange for the dashboard's report. `serverId` is an existing server.
 */
export async function sendTestReferralEvent(deps: SendTestReferralEventDeps, serverId: string, rawEvent: string): Promise<AttemptExchange> {
  const event = rawEvent.trim() === "" ? "registered" : rawEvent.trim();
  if (!isReferralEventName(event)) throw new DomainError("invalid_argument", ERROR_TEXT.badEvent);
  const now = deps.now();
  const secret = await loadNewestReferralSecret(deps.prisma, deps.secretBox, serverId, now);
  if (!secret) throw new DomainError("failed_precondition", "no active referral secret: create one in the referrals tab first");
  const t = Math.floor(now.getTime() / 1000);
  const body = JSON.stringify({
    event,
    token: "test-token",
    server_id: serverId,
    referee_identity: "test-player",
    server_event_id: `dashboard-test-${now.getTime()}`,
    ts: t,
    test: true,
  });
  const request = {
    url: `${deps.publicBaseUrl.replace(/\/+$/, "")}${INGEST_PATH}`,
    body,
    headers: { "Content-Type": "application/json", "X-Service-Signature": formatIngestSignature(secret.secret, t, body, secret.kid) },
    canonicalString: canonicalString(t, body),
  };
  // The service's own public endpoint is trusted configuration, so the callback address guard does not apply.
  const outcome = await sendCallback(request, { timeoutMs: deps.callbackTimeoutMs, allowInsecure: true, now: deps.now });
  return { ...toHttpExchange(request, outcome), signedString: request.canonicalString };
}
