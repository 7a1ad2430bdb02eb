import test from "ava";
import { create } from "@bufbuild/protobuf";
import { ResolveSigningKeysResponseSchema, SigningKeyStatus, type ResolveSigningKeysResponse } from "../../gen/proto/servers/v1/servers_pb.js";
import { createSigningKeyCache } from "../../gateway/signing-key-cache.js";

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

test("unknown-server, disabled and failed answers are never cached", async (t) => {
  const cache = createSigningKeyCache({ ttlMs: 60_000 });
  for (const status of [SigningKeyStatus.UNKNOWN_SERVER, SigningKeyStatus.REFERRALS_DISABLED]) {
    const rpc = counting(() => create(ResolveSigningKeysResponseSchema, { status }));
    await cache.get(`s${status}`, rpc.load);
    await cache.get(`s${status}`, rpc.load);
    t.is(rpc.calls(), 2, `status ${status}`);
  }
  const failing = counting(() => new Error("unavailable"));
  await t.throwsAsync(() => cache.get("f", failing.load));
  await t.throwsAsync(() => cache.get("f", failing.load));
  t.is(failing.calls(), 2);
});

test("forget drops an entry and says whether there was one; ttlMs 0 disables the cache", async (t) => {
  const cache = createSigningKeyCache({ ttlMs: 1000 });
  const rpc = counting(() => ok("k1"));
  t.false(cache.forget("s"));
  await cache.get("s", rpc.load);
  t.true(cache.forget("s"));
  await cache.get("s", rpc.load);
  t.is(rpc.calls(), 2);
  const off = createSigningKeyCache({ ttlMs: 0 });
  await off.get("s", rpc.load);
  await off.get("s", rpc.load);
  t.is(rpc.calls(), 4);
});
