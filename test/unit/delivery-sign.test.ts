import test from "ava";
import { buildHeartEventBody, signCallback } from "../../services/delivery/pipeline/send-callback.js";
import { NIL_UUID } from "../../services/shared/values/ids.js";

// Frozen vectors computed outside the project with openssl, e.g.
//   printf '%s' "1773145800.$BODY" | openssl dgst -sha256 -hmac "$SECRET"
// so the signer and these tests cannot agree on the same bug.
const NEW_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OLD_SECRET = "whsec_dGVzdC1zZWNyZXQtb2xkLWtleS0zMmJ5dGVzISE=";
const T = 1773145800;
const BODY =
  '{"event":"heart.counted","server_id":"7f0c2a1e-3b4d-4c5e-8f90-a1b2c3d4e5f6","username":"Steve","heart_id":"0b8f7e6d-5c4b-4a39-8281-706f5e4d3c2b","period":"2026-03","timestamp":1773145800,"streak_day":3}';
const MAC_NEW = "f858a87df88cecaaf2904592137b7868a0b544544652b883a2c0db8df4e062c9";
const MAC_OLD = "85b7d2c10c7c255940e9a936dc0982f897a82ac35c9a920e51f6557bfa5e1afa";
// openssl dgst -sha256 -mac HMAC -macopt hexkey:<base64-decoded secret> -binary | base64, over "<heart_id>.<t>.<body>".
const STANDARD_NEW = "q7/+Nqow5KMNZEKS03EnJdofMfRogJbp5K96uXb1He4=";

const FIELDS = {
  event: "heart.counted" as const,
  serverId: "7f0c2a1e-3b4d-4c5e-8f90-a1b2c3d4e5f6",
  username: "Steve",
  heartId: "0b8f7e6d-5c4b-4a39-8281-706f5e4d3c2b",
  period: "2026-03",
  streakDay: 3,
};

test("callback body: exactly the contract's field names, timestamp = t, streak_day last", (t) => {
  t.is(buildHeartEventBody(FIELDS, T), BODY);
});

test("callback body: streak_day is omitted (not 0, not null) when unavailable", (t) => {
  const { streakDay: _omit, ...noStreak } = FIELDS;
  const parsed = JSON.parse(buildHeartEventBody(noStreak, T)) as Record<string, unknown>;
  t.false("streak_day" in parsed);
  t.deepEqual(Object.keys(parsed), ["event", "server_id", "username", "heart_id", "period", "timestamp"]);
});

test("callback body: streak_day 0 (streak broken) is sent as 0", (t) => {
  const parsed = JSON.parse(buildHeartEventBody({ ...FIELDS, streakDay: 0 }, T)) as Record<string, unknown>;
  t.is(parsed.streak_day, 0);
});

test("callback signature: t=<unix>,v1=<bare lower-case hex> of HMAC(secret, '<t>.<body>') matches an openssl vector", (t) => {
  const signed = signCallback({ url: "https://example.test/hook", fields: FIELDS, secretsNewestFirst: [NEW_SECRET], standardWebhooks: false, t: T });
  t.is(signed.body, BODY);
  t.is(signed.headers["X-Service-Signature"], `t=${T},v1=${MAC_NEW}`);
  t.is(signed.canonicalString, `${T}.${BODY}`);
});

test("callback signature: during a rotation one v1 per active secret, newest first", (t) => {
  const signed = signCallback({
    url: "https://example.test/hook",
    fields: FIELDS,
    secretsNewestFirst: [NEW_SECRET, OLD_SECRET],
    standardWebhooks: false,
    t: T,
  });
  t.is(signed.headers["X-Service-Signature"], `t=${T},v1=${MAC_NEW},v1=${MAC_OLD}`);
});

test("callback headers: Content-Type json and X-Service-Event name the event; no Standard Webhooks headers unless opted in", (t) => {
  const signed = signCallback({ url: "https://example.test/hook", fields: FIELDS, secretsNewestFirst: [NEW_SECRET], standardWebhooks: false, t: T });
  t.is(signed.headers["Content-Type"], "application/json");
  t.is(signed.headers["X-Service-Event"], "heart.counted");
  t.false("webhook-id" in signed.headers);
  t.false("webhook-signature" in signed.headers);
});

test("Standard Webhooks opt-in: webhook-id = heart_id, webhook-timestamp = t, webhook-signature matches an openssl vector", (t) => {
  const signed = signCallback({ url: "https://example.test/hook", fields: FIELDS, secretsNewestFirst: [NEW_SECRET, OLD_SECRET], standardWebhooks: true, t: T });
  t.is(signed.headers["webhook-id"], FIELDS.heartId);
  t.is(signed.headers["webhook-timestamp"], String(T));
  const [first, second, ...rest] = (signed.headers["webhook-signature"] ?? "").split(" ");
  t.is(first, `v1,${STANDARD_NEW}`);
  t.regex(second ?? "", /^v1,[A-Za-z0-9+/]{43}=$/);
  t.is(rest.length, 0);
  // The contract's own header is still there beside them.
  t.is(signed.headers["X-Service-Signature"], `t=${T},v1=${MAC_NEW},v1=${MAC_OLD}`);
});

test("heart.test: the nil uuid as heart_id and X-Service-Event heart.test", (t) => {
  const signed = signCallback({
    url: "https://example.test/hook",
    fields: { event: "heart.test", serverId: FIELDS.serverId, username: "TestPlayer", heartId: NIL_UUID, period: "2026-03" },
    secretsNewestFirst: [NEW_SECRET],
    standardWebhooks: false,
    t: T,
  });
  t.is(NIL_UUID, "00000000-0000-0000-0000-000000000000");
  t.is(signed.headers["X-Service-Event"], "heart.test");
  t.deepEqual(JSON.parse(signed.body), {
    event: "heart.test",
    server_id: FIELDS.serverId,
    username: "TestPlayer",
    heart_id: NIL_UUID,
    period: "2026-03",
    timestamp: T,
  });
});

test("signCallback refuses to sign without a secret", (t) => {
  t.throws(() => signCallback({ url: "https://example.test/hook", fields: FIELDS, secretsNewestFirst: [], standardWebhooks: false, t: T }));
});
