/** The settings of issue 20's anti-abuse work: ABUSE_RULES_JSON on the referral service, the `/r/` limit on the gateway. */
import test from "ava";
import { randomBytes } from "node:crypto";
import { DEFAULT_REFERRAL_LINK_CLICKS_PER_IP, DEFAULT_REFERRAL_LINK_WINDOW_MS } from "../../gateway/failure-limiter.js";
import { loadGatewayConfig } from "../../gateway/config.js";
import { loadReferralServiceConfig } from "../../services/referral-service/config.js";
import { DEFAULT_ABUSE_RULES } from "../../services/referral/domain/abuse-signals.js";

const service = {
  DATABASE_URL: "postgres://u@127.0.0.1:5432/db",
  SECRETS_KEY: randomBytes(32).toString("base64"),
  ALLOW_UNAUTHENTICATED_RPC: "true",
};
const gateway = { REFERRAL_SERVICE_TOKEN: `rst_${"x".repeat(40)}` };

test("ABUSE_RULES_JSON: absent -> the documented defaults; a subset overrides them; a bad one stops the start naming every problem", (t) => {
  t.deepEqual(loadReferralServiceConfig(service).abuseRules, DEFAULT_ABUSE_RULES);
  const rules = loadReferralServiceConfig({ ...service, ABUSE_RULES_JSON: '{"clickVelocity":{"maxClicks":25}}' }).abuseRules;
  t.is(rules.clickVelocity.maxClicks, 25);
  t.is(rules.ipFanout.maxReferees, DEFAULT_ABUSE_RULES.ipFanout.maxReferees);
  const error = t.throws(() => loadReferralServiceConfig({ ...service, ABUSE_RULES_JSON: '{"ipFanout":{"maxReferees":"many"},"nope":{}}' }));
  t.regex(error?.message ?? "", /abuse rules: ipFanout\.maxReferees must be a non-negative integer/);
  t.regex(error?.message ?? "", /abuse rules: unknown rule "nope"/);
});

test("the gateway's /r/ limit: defaults 60 clicks per 60 s per address; both settings read; a negative limit is refused", (t) => {
  t.deepEqual(loadGatewayConfig(gateway).referralLinkLimit, { windowMs: DEFAULT_REFERRAL_LINK_WINDOW_MS, perIp: DEFAULT_REFERRAL_LINK_CLICKS_PER_IP });
  t.is(DEFAULT_REFERRAL_LINK_CLICKS_PER_IP, 60);
  t.deepEqual(loadGatewayConfig({ ...gateway, REFERRAL_LINK_CLICKS_PER_IP: "0", REFERRAL_LINK_WINDOW_MS: "5000" }).referralLinkLimit, {
    windowMs: 5000,
    perIp: 0,
  });
  t.throws(() => loadGatewayConfig({ ...gateway, REFERRAL_LINK_CLICKS_PER_IP: "-1" }));
});
