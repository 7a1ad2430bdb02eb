import test from "ava";
import { create } from "@bufbuild/protobuf";
import { ResolveSigningKeysResponseSchema, SigningKeyStatus, type ResolveSigningKeysResponse } from "../../gen/proto/servers/v1/servers_pb.js";
import { createSigningKeyCache, STALE_SIGNING_KEYS_RETENTION_MS } from "../../gateway/signing-key-cache.js";

const ok = (kid: string) => create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.OK, keys: [{ kid, secret: new TextEncoder().encode(kid) }] });

function counting(answer: () => ResolveSigningKeysResponse | Error) {
  let calls = 0;
  return {
    load: async () => {
      calls++;
      const a = answer();
      if (a instanceof Error) throw a;
      return a;
    },
    calls: () => calls,
  };
}

test("an OK answer is reused for ttlMs, then asked again", async (t) => {
  let clock = 0;
  const cache = createSigningKeyCache({ ttlMs: 1000, now: () => clock });
  const rpc = counting(() => ok("k1"));
  await cache.get("s", rpc.load);
  clock = 999;
  await cache.get("s", rpc.load);
  t.is(rpc.calls(), 1);
  clock = 1000;
  await cache.get("s", rpc.load);
  t.is(rpc.calls(), 2);
});

test("concurrent misses share one lookup (single flight)", async (t) => {
  const cache = createSigningKeyCache({ ttlMs: 1000 });
  const rpc = counting(() => ok("k1"));
  await Promise.all(Array.from({ length: 10 }, () => cache.get("s", rpc.load)));
  t.is(rpc.calls(), 1);
});

test("disabled and failed answers are never cached", async (t) => {
  const cache = createSigningKeyCache({ ttlMs: 60_000 });
  const rpc = counting(() => create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.REFERRALS_DISABLED }));
  await cache.get("s", rpc.load);
  await cache.get("s", rpc.load);
  t.is(rpc.calls(), 2, "a re-enabled server works at once");
  const failing = counting(() => new Error("unavailable"));
  await t.throwsAsync(() => cache.get("f", failing.load));
  await t.throwsAsync(() => cache.get("f", failing.load));
  t.is(failing.calls(), 2);
});

test("an unknown server is remembered for unknownServerTtlMs, even with the key cache off (negative caching)", async (t) => {
  let clock = 0;
  const cache = createSigningKeyCache({ ttlMs: 0, unknownServerTtlMs: 30_000, now: () => clock });
  const rpc = counting(() => create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.UNKNOWN_SERVER }));
  for (let i = 0; i < 100; i++) await cache.get("ghost", rpc.load);
  t.is(rpc.calls(), 1);
  clock = 30_000;
  await cache.get("ghost", rpc.load);
  t.is(rpc.calls(), 2, "asked again once the negative entry expired");
  const off = createSigningKeyCache({ ttlMs: 0, unknownServerTtlMs: 0 });
  await off.get("ghost", rpc.load);
  await off.get("ghost", rpc.load);
  t.is(rpc.calls(), 4);
});

test("invalidate after a failed MAC allows one fresh lookup per server per refresh interval, never one per failure", async (t) => {
  let clock = 0;
  const cache = createSigningKeyCache({ ttlMs: 10_000, refreshIntervalMs: 1_000, now: () => clock });
  const rpc = counting(() => ok("k1"));
  t.false(cache.invalidate("s"), "nothing cached: nothing to refresh");
  await cache.get("s", rpc.load);
  t.true(cache.invalidate("s"), "the first failure refreshes at once (a just-created secret verifies)");
  await cache.get("s", rpc.load);
  t.is(rpc.calls(), 2);
  for (let i = 0; i < 300; i++) {
    t.false(cache.invalidate("s"));
    await cache.get("s", rpc.load);
  }
  t.is(rpc.calls(), 2, "300 more failures within the interval: no lookup");
  clock = 1_000;
  t.true(cache.invalidate("s"));
  await cache.get("s", rpc.load);
  t.is(rpc.calls(), 3);
  t.true(cache.invalidate("other") === false, "per server");
});

test("a refresh that found the keys changed (an owner created or revoked a secret) does not use up the interval", async (t) => {
  const cache = createSigningKeyCache({ ttlMs: 60_000, refreshIntervalMs: 60_000, now: () => 0 });
  let kid = "k1";
  const rpc = counting(() => ok(kid));
  await cache.get("s", rpc.load);
  kid = "k2";
  t.true(cache.invalidate("s"));
  await cache.get("s", rpc.load);
  kid = "k3";
  t.true(cache.invalidate("s"), "the previous refresh found k2: another change may follow at once");
  await cache.get("s", rpc.load);
  t.true(cache.invalidate("s"), "k3 was new too");
  await cache.get("s", rpc.load);
  t.false(cache.invalidate("s"), "that refresh found nothing new: the interval applies");
  t.is(rpc.calls(), 4);
});

test("ttlMs 0 disables the key cache (and so the refresh)", async (t) => {
  const rpc = counting(() => ok("k1"));
  const off = createSigningKeyCache({ ttlMs: 0 });
  await off.get("s", rpc.load);
  await off.get("s", rpc.load);
  t.false(off.invalidate("s"));
  t.is(rpc.calls(), 2);
});

test("peek: the fresh answer without a lookup, then the last OK keys as stale (they only vouch for a lookup) until a non-OK answer or the retention ends", async (t) => {
  let clock = 0;
  const cache = createSigningKeyCache({ ttlMs: 1000, now: () => clock });
  t.is(cache.peek("s"), undefined, "nothing held before the first lookup");
  await cache.get("s", async () => ok("k1"));
  t.deepEqual(cache.peek("s"), { answer: ok("k1"), fresh: true });
  clock = 1000;
  t.deepEqual(cache.peek("s"), { answer: ok("k1"), fresh: false }, "past ttlMs the keys are kept, as stale");
  clock = STALE_SIGNING_KEYS_RETENTION_MS - 1;
  t.is(cache.peek("s")?.fresh, false);
  clock = STALE_SIGNING_KEYS_RETENTION_MS;
  t.is(cache.peek("s"), undefined, "past the retention nothing is held");

  await cache.get("d", async () => ok("k1"));
  clock += 1000;
  await cache.get("d", async () => create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.REFERRALS_DISABLED }));
  t.is(cache.peek("d"), undefined, "a non-OK answer ends the stale keys");

  await cache.get("u", async () => create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.UNKNOWN_SERVER }));
  t.is(cache.peek("u")?.answer.status, SigningKeyStatus.UNKNOWN_SERVER, "a remembered unknown server is peeked as fresh");

  const off = createSigningKeyCache({ ttlMs: 0, now: () => clock });
  await off.get("s", async () => ok("k1"));
  t.is(off.peek("s"), undefined, "with the key cache off no keys are held, stale or fresh");
});
