/** The referral history's age limits (issue 30): RETENTION_CLICK_DAYS and RETENTION_REFERRAL_DAYS on the referral service. */
import test from "ava";
import { randomBytes } from "node:crypto";
import { loadReferralServiceConfig } from "../../services/referral-service/config.js";
import { MIN_HISTORY_DAYS } from "../../services/retention/retention-settings.js";
import { ATTRIBUTION_WINDOW_DAYS, LOCK_DAYS } from "../../services/servers/domain/referral-settings.js";

const DAY_SECONDS = 86_400;
const service = {
  DATABASE_URL: "postgres://u@127.0.0.1:5432/db",
  SECRETS_KEY: randomBytes(32).toString("base64"),
  ALLOW_UNAUTHENTICATED_RPC: "true",
};

test("the referral history's shortest age limit is one day past the longest attribution window and lock a server can set", (t) => {
  t.is(MIN_HISTORY_DAYS, Math.max(ATTRIBUTION_WINDOW_DAYS.max, LOCK_DAYS.max) + 1);
  t.is(MIN_HISTORY_DAYS, 366);
});

test("RETENTION_CLICK_DAYS and RETENTION_REFERRAL_DAYS: default 400 days each; any value from the shortest limit is read", (t) => {
  const defaults = loadReferralServiceConfig(service).retention;
  t.is(defaults.clickSeconds, 400 * DAY_SECONDS);
  t.is(defaults.referralSeconds, 400 * DAY_SECONDS);
  const set = loadReferralServiceConfig({ ...service, RETENTION_CLICK_DAYS: "366", RETENTION_REFERRAL_DAYS: "730" }).retention;
  t.is(set.clickSeconds, 366 * DAY_SECONDS);
  t.is(set.referralSeconds, 730 * DAY_SECONDS);
});

test("a click or referral age limit inside a server's attribution window or lock stops the start, naming both settings", (t) => {
  const error = t.throws(() => loadReferralServiceConfig({ ...service, RETENTION_CLICK_DAYS: "90", RETENTION_REFERRAL_DAYS: "365" }));
  t.regex(error?.message ?? "", /RETENTION_CLICK_DAYS must be >= 366, got 90/);
  t.regex(error?.message ?? "", /RETENTION_REFERRAL_DAYS must be >= 366, got 365/);
  t.throws(() => loadReferralServiceConfig({ ...service, RETENTION_REFERRAL_DAYS: "many" }), { message: /RETENTION_REFERRAL_DAYS must be an integer/ });
});
