/** RETENTION_HEART_DAYS (services/retention/retention-settings.ts): how long hearts, their ledger rows and payouts, and voter states are kept. */
import test from "ava";
import { randomBytes } from "node:crypto";
import { loadReferralServiceConfig } from "../../services/referral-service/config.js";
import { DEFAULT_FRAUD_RULES, type FraudRules } from "../../services/hearts/domain/fraud-rules.js";
import { CLAIM_HOLD_DAYS } from "../../services/servers/claim-settings.js";
import { heartWindowsDays, readRetentionSettings } from "../../services/retention/retention-settings.js";
import { createEnvReader } from "../../services/shared/runtime/config.js";

const DAY_SECONDS = 86_400;

test("RETENTION_HEART_DAYS: 400 days by default; a horizon longer than every window is taken", (t) => {
  t.is(readRetentionSettings(createEnvReader({}), DEFAULT_FRAUD_RULES).heartSeconds, 400 * DAY_SECONDS);
  t.is(readRetentionSettings(createEnvReader({ RETENTION_HEART_DAYS: "120" }), DEFAULT_FRAUD_RULES).heartSeconds, 120 * DAY_SECONDS);
});

test("the shortest horizon allowed outlasts the longest claim hold window (90 days), the cooldown, the streak and the fraud windows", (t) => {
  t.is(CLAIM_HOLD_DAYS.max, 90);
  t.is(heartWindowsDays(DEFAULT_FRAUD_RULES), 91);
  const longIdentityWindow: FraudRules = { ...DEFAULT_FRAUD_RULES, ipIdentities: { ...DEFAULT_FRAUD_RULES.ipIdentities, windowMinutes: 200 * 24 * 60 } };
  t.is(heartWindowsDays(longIdentityWindow), 201, "a fraud window longer than the hold window raises the floor");
});

test("a horizon not longer than every window a heart matters to stops the start, saying why", (t) => {
  for (const days of ["90", "1"]) {
    const r = createEnvReader({ RETENTION_HEART_DAYS: days });
    readRetentionSettings(r, DEFAULT_FRAUD_RULES);
    const error = t.throws(() => r.finish({}));
    t.regex(
      error?.message ?? "",
      new RegExp(
        `RETENTION_HEART_DAYS must be >= 91 \\(longer than the longest claim hold window, cooldown, streak and fraud window a heart matters to\\), got ${days}`,
      ),
    );
  }
  const r = createEnvReader({ RETENTION_HEART_DAYS: "91" });
  readRetentionSettings(r, DEFAULT_FRAUD_RULES);
  t.notThrows(() => r.finish({}));
  const tooLong = createEnvReader({ RETENTION_HEART_DAYS: "4000" });
  readRetentionSettings(tooLong, DEFAULT_FRAUD_RULES);
  t.regex(t.throws(() => tooLong.finish({}))?.message ?? "", /RETENTION_HEART_DAYS must be <= 3650/);
});

test("the referral service refuses to start with a horizon inside a fraud window it was given (FRAUD_RULES_JSON)", (t) => {
  const service = { DATABASE_URL: "postgres://u@127.0.0.1:5432/db", SECRETS_KEY: randomBytes(32).toString("base64"), ALLOW_UNAUTHENTICATED_RPC: "true" };
  t.is(loadReferralServiceConfig(service).retention.heartSeconds, 400 * DAY_SECONDS);
  const fraud = JSON.stringify({ subnetIdentities: { windowMinutes: 500 * 24 * 60 } });
  const error = t.throws(() => loadReferralServiceConfig({ ...service, FRAUD_RULES_JSON: fraud }));
  t.regex(error?.message ?? "", /RETENTION_HEART_DAYS must be >= 501 .*, got 400/);
});
