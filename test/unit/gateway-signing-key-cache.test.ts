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

test("disabled and failed answers are never served from the cache, but the next lookup waits for the server's turn (one per refresh interval)", async (t) => {
  let clock = 0;
  const cache = createSigningKeyCache({ ttlMs: 60_000, refreshIntervalMs: 50, now: () => clock });
  const rpc = counting(() => create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.REFERRALS_DISABLED }));
  await cache.get("s", rpc.load);
  const waiting = Promise.all(Array.from({ length: 100 }, () => cache.get("s", rpc.load)));
  t.is(rpc.calls(), 1, "100 requests within the interval: no lookup yet");
  clock = 50;
  await waiting;
  t.is(rpc.calls(), 2, "then one lookup, shared: a re-enabled server works within the interval");
  const failing = counting(() => new Error("unavailable"));
  await t.throwsAsync(() => cache.get("f", failing.load));
  clock = 100;
  await t.throwsAsync(() => cache.get("f", failing.load));
  t.is(failing.calls(), 2, "a failed lookup is not kept");
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

test("refresh after a failed MAC: keys looked up since the request arrived - one lookup per server per refresh interval however many ask, never one per failure", async (t) => {
  let clock = 0;
  const cache = createSigningKeyCache({ ttlMs: 10_000, refreshIntervalMs: 1_000, now: () => clock });
  let kid = "k1";
  const rpc = counting(() => ok(kid));
  await cache.get("s", rpc.load);
  clock = 10;
  kid = "k2";
  const first = await cache.refresh("s", rpc.load, 10);
  t.is(first?.keys[0]?.kid, "k2", "a secret created after the keys were cached verifies at once");
  t.is(rpc.calls(), 2, "the previous lookup was 1 s ago or more: at once");
  t.is((await cache.refresh("s", rpc.load, 10))?.keys[0]?.kid, "k2", "another request that arrived by then shares it");
  t.is(rpc.calls(), 2);

  clock = 20;
  kid = "k3";
  const forged = Array.from({ length: 300 }, () => cache.refresh("s", rpc.load, 20));
  t.is(rpc.calls(), 2, "300 failures within the interval: no lookup yet, they wait");
  clock = 1_010;
  const answers = await Promise.all(forged);
  t.is(rpc.calls(), 3, "then one lookup for all of them");
  t.true(
    answers.every((a) => a?.keys[0]?.kid === "k3"),
    "a secret created before they arrived verifies too",
  );
  t.is((await cache.get("s", rpc.load)).keys[0]?.kid, "k3", "and the cache holds the fresher keys");
});

test("refresh returns the caller's own lookup when it already started after the request arrived: no second lookup", async (t) => {
  let clock = 0;
  const cache = createSigningKeyCache({ ttlMs: 1_000, now: () => clock });
  const rpc = counting(() => ok("k1"));
  clock = 5;
  await cache.get("s", rpc.load);
  await cache.refresh("s", rpc.load, 5);
  t.is(rpc.calls(), 1);
});

test("ttlMs 0 disables the key cache (and so the refresh: every lookup is the request's own)", async (t) => {
  const rpc = counting(() => ok("k1"));
  const off = createSigningKeyCache({ ttlMs: 0 });
  await off.get("s", rpc.load);
  await off.get("s", rpc.load);
  t.is(off.refresh("s", rpc.load, 0), undefined);
  t.is(rpc.calls(), 2);
});

test("a flood of unknown server ids never pushes a real server's keys out of the cache", async (t) => {
  const cache = createSigningKeyCache({ ttlMs: 60_000, now: () => 0 });
  await cache.get("real", async () => ok("k1"));
  const unknown = async () => create(ResolveSigningKeysResponseSchema, { status: SigningKeyStatus.UNKNOWN_SERVER });
  for (let i = 0; i < 20_000; i++) await cache.get(`ghost-${i}`, unknown);
  t.deepEqual(cache.peek("real"), { answer: ok("k1"), fresh: true });
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
