/**
 * Voters' addresses (issue 30): the keyed pseudonyms kept after an address is erased
 * (services/shared/values/address-key.ts) and the settings ADDRESS_RETENTION_HOURS and ADDRESS_KEY_VERSION.
 */
import test from "ava";
import { createHmac, randomBytes } from "node:crypto";
import { loadReferralServiceConfig } from "../../services/referral-service/config.js";
import { DEFAULT_ADDRESS_RETENTION_HOURS } from "../../services/shared/runtime/address-settings.js";
import { createSecretBox } from "../../services/shared/runtime/secrets.js";
import { addressKeyOf, addressPseudonyms, currentAddressKey, pseudonymOf } from "../../services/shared/values/address-key.js";

const box = createSecretBox(Buffer.alloc(32, 7));

test("a pseudonym is the key version and the first 16 bytes of HMAC-SHA256(address key, address) in base64url; never the address", (t) => {
  const key = addressKeyOf(box, 1);
  t.deepEqual(key.key, box.deriveKey("voter address pseudonym v1"), "the address key is SECRETS_KEY's HKDF for its own purpose");
  const mac = createHmac("sha256", key.key).update("203.0.113.7").digest().subarray(0, 16).toString("base64url");
  t.is(pseudonymOf(key, "203.0.113.7"), `v1.${mac}`);
  t.regex(pseudonymOf(key, "203.0.113.7"), /^v1\.[A-Za-z0-9_-]{22}$/);
  t.false(pseudonymOf(key, "203.0.113.7").includes("203"));
});

test("equal addresses under one key give equal pseudonyms; other addresses, another version or another SECRETS_KEY give others", (t) => {
  const v1 = addressKeyOf(box, 1);
  t.is(pseudonymOf(v1, "2001:db8::1"), pseudonymOf(addressKeyOf(box, 1), "2001:db8::1"));
  t.not(pseudonymOf(v1, "203.0.113.7"), pseudonymOf(v1, "203.0.113.8"));
  t.not(pseudonymOf(v1, "203.0.113.0/24"), pseudonymOf(v1, "203.0.113.7"));
  const v2 = pseudonymOf(addressKeyOf(box, 2), "203.0.113.7");
  t.true(v2.startsWith("v2."));
  t.not(v2.slice(3), pseudonymOf(v1, "203.0.113.7").slice(3), "a rotated key is unrelated to the old one");
  t.not(pseudonymOf(addressKeyOf(createSecretBox(randomBytes(32)), 1), "203.0.113.7"), pseudonymOf(v1, "203.0.113.7"));
  t.throws(() => addressKeyOf(box, 0));
});

test("a heart's or a click's pseudonyms: one for the IP, one for the subnet, none for an unknown one", (t) => {
  const key = currentAddressKey({ secretBox: box });
  t.is(key.version, 1, "ADDRESS_KEY_VERSION unset: version 1");
  t.is(currentAddressKey({ secretBox: box, addressKeyVersion: 3 }).version, 3);
  t.deepEqual(addressPseudonyms(key, { ip: "203.0.113.7", subnet: "203.0.113.0/24" }), {
    ipKey: pseudonymOf(key, "203.0.113.7"),
    subnetKey: pseudonymOf(key, "203.0.113.0/24"),
  });
  t.deepEqual(addressPseudonyms(key, { ip: "not an address", subnet: null }), { ipKey: pseudonymOf(key, "not an address"), subnetKey: null });
  t.deepEqual(addressPseudonyms(key, { ip: null, subnet: null }), { ipKey: null, subnetKey: null });
});

const service = { DATABASE_URL: "postgres://u@127.0.0.1:5432/db", SECRETS_KEY: randomBytes(32).toString("base64"), ALLOW_UNAUTHENTICATED_RPC: "true" };

test("ADDRESS_RETENTION_HOURS (default 48) and ADDRESS_KEY_VERSION (default 1) are read; a horizon shorter than a rule's window stops the start", (t) => {
  t.is(DEFAULT_ADDRESS_RETENTION_HOURS, 48);
  t.deepEqual(loadReferralServiceConfig(service).addresses, { retentionHours: 48, keyVersion: 1 });
  t.deepEqual(loadReferralServiceConfig({ ...service, ADDRESS_RETENTION_HOURS: "30", ADDRESS_KEY_VERSION: "2" }).addresses, {
    retentionHours: 30,
    keyVersion: 2,
  });
  const short = t.throws(() => loadReferralServiceConfig({ ...service, ADDRESS_RETENTION_HOURS: "12" }));
  t.regex(short?.message ?? "", /ADDRESS_RETENTION_HOURS \(12\) is shorter than the fraud ipIdentities window/);
  const longWindow = t.throws(() => loadReferralServiceConfig({ ...service, ABUSE_RULES_JSON: '{"ipFanout":{"windowMinutes":4320}}' }));
  t.regex(longWindow?.message ?? "", /shorter than the abuse ipFanout window/);
  t.throws(() => loadReferralServiceConfig({ ...service, ADDRESS_KEY_VERSION: "0" }));
});
