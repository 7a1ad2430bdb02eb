import { SigningKeyStatus } from "../gen/proto/servers/v1/servers_pb.js";
import { errorReply } from "./http-errors.js";
import { forwardEvent, type IngestRpcs } from "./forward.js";
import { classifySigningKeys } from "./signing-key-cache.js";
import { keysOf, readCachedKeys, verifySignedRequest, type KeyPurpose, type LookupGuards, type SignedInput, type SignedResult } from "./signed-request.js";
import { validateEvent } from "./validate-event.js";

/** The server's referral secrets, the keys of the ingest endpoint (step 5). */
function referralSecrets(rpcs: IngestRpcs): KeyPurpose {
  const refresh = rpcs.refreshSigningKeys?.bind(rpcs);
  return {
    name: "signing key",
    resolve: (serverId) => rpcs.resolveSigningKeys({ serverId }),
    ...(refresh ? { refresh } : {}),
    status: { ok: SigningKeyStatus.OK, unknownServer: SigningKeyStatus.UNKNOWN_SERVER, disabled: SigningKeyStatus.REFERRALS_DISABLED },
    disabled: { kind: "referralsDisabled", outcome: "referrals_disabled" },
    surface: "ingest",
  };
}

/**
 * POST /api/referral/events, steps 2-10 of the contract's order of checks (step 1, the 64 KiB
 * limit, happens while reading the body; steps 2-7 are gateway/signed-request.ts, shared with the
 * pull API). Each step only runs when the previous ones passed, so the first failing step decides
 * the answer:
 *
 *  2. X-Service-Signature missing/malformed -> 400
 *  3. body not valid UTF-8 JSON, or not an object -> 400 `body is not valid JSON`
 *  4. `server_id` missing/empty/not a string -> 400 (the only field read before the MAC)
 *     then: a MAC that verifies against the gateway's cached keys goes on without the limiter;
 *     otherwise, with a `limiter`: too many failed signatures from this source, or (for a server
 *     id not known to exist) overall -> 429 with Retry-After, before any lookup (failures of steps
 *     5 and 6 are counted)
 *  5. unknown server / referrals disabled or no active secret -> 404
 *  6. MAC (by `kid`, or against every active key; constant-time) -> 401 bad_signature
 *  7. |now - t| > 300 s -> 401 stale (after the MAC, so a forged `t` learns nothing)
 *  8. field validation -> 400
 *  9. `test: true` -> 200 `{ok: true, test: true}`, nothing looked up or written
 * 10. ApplyEvent (token lookup, dedup, state machine) -> 200 / 404 / 422 / 500
 */
export async function handleIngest(input: SignedInput, rpcs: IngestRpcs, now: () => Date, guards: LookupGuards = {}): Promise<SignedResult> {
  const peek = rpcs.peekSigningKeys;
  const cached = peek ? (serverId: string) => readCachedKeys(peek(serverId), classifySigningKeys) : undefined;
  const signed = await verifySignedRequest(input, keysOf(referralSecrets(rpcs), { ...guards, cached }), now);
  if (signed.kind === "rejected") return signed.result;
  const { body, serverId, kid } = signed;

  const validated = validateEvent(body);
  if (validated.kind === "invalid") return { reply: errorReply("invalidField", validated.error), outcome: "invalid_field", serverId, kid };
  const event = validated.value;

  if (event.test) return { reply: { status: 200, body: { ok: true, test: true } }, outcome: "test", serverId, kid };

  return { ...(await forwardEvent(rpcs, event, kid)), serverId, kid };
}
