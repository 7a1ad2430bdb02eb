/**
 * Unsigned traffic costs no database work beyond a bounded, cached lookup: each test counts the
 * gateway's real ResolveSigningKeys calls (the referral service's only lookup for ingest) while
 * flooding the real stack with forgeries.
 */
import test from "ava";
import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import type { GatewayDeps } from "../../gateway/server.js";
import { DEFAULT_SIGNING_KEY_CACHE_MS } from "../../gateway/signing-key-cache.js";
import type { ReferralServiceClients } from "../../gateway/clients.js";
import { MAX_ACTIVE_SECRETS_PER_SERVER } from "../../services/servers/domain/secret-policy.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { startGatewayStack, type GatewayStack, type RawResponse } from "./gateway-stack.js";

/** Gateway deps whose admin client counts ResolveSigningKeys calls. */
function countingLookups(overrides: Partial<GatewayDeps>) {
  const counter = { lookups: 0 };
  const make = ({ clients }: { clients: ReferralServiceClients }): Partial<GatewayDeps> => ({
    admin: {
      ...clients.admin,
      resolveSigningKeys: (...args: Parameters<typeof clients.admin.resolveSigningKeys>) => {
        counter.lookups++;
        return clients.admin.resolveSigningKeys(...args);
      },
    },
    ...overrides,
  });
  return { counter, make };
}

const event = (serverId: string, n: number) => ({
  event: "registered",
  token: "t",
  server_id: serverId,
  referee_identity: "p",
  server_event_id: `e-${n}`,
  test: true,
});

async function flood(stack: GatewayStack, count: number, body: (n: number) => unknown) {
  const statuses = new Map<number, number>();
  // Sequential batches of 25 concurrent requests: both the concurrent and the serial shape of a flood.
  for (let i = 0; i < count; i += 25) {
    const batch = await Promise.all(Array.from({ length: Math.min(25, count - i) }, (_, j) => stack.postSigned({ secret: "rsec_forged" }, body(i + j))));
    for (const res of batch) statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
  }
  return statuses;
}

test("300 forged signatures for a real server cost at most one key lookup per refresh interval (was 301: one cache drop per failed MAC)", async (t) => {
  const refreshMs = 500;
  const { counter, make } = countingLookups({ signingKeyCacheMs: 60_000, signingKeyRefreshMs: refreshMs });
  const stack = await startGatewayStack({ gatewayOverrides: make });
  t.teardown(() => stack.close());
  const server = await stack.createServer();
  const before = counter.lookups;
  const started = Date.now();
  const statuses = await flood(stack, 300, (n) => event(server.serverId, n));
  const intervals = Math.ceil((Date.now() - started) / refreshMs);
  t.deepEqual([...statuses], [[401, 300]]);
  // The first lookup, then at most one per interval: the forgeries past it wait for the next and share it.
  t.true(counter.lookups - before <= 1 + intervals, `lookups: ${counter.lookups - before} in ${intervals} intervals`);
  const valid = await stack.postSigned(server, event(server.serverId, 0));
  t.is(valid.status, 200, "the real secret still verifies from the cache");
});

test("300 requests for one unknown server id cost 1 lookup (negative caching)", async (t) => {
  // The production default key cache (the stack's default is off); unknown answers are remembered on top of it.
  const { counter, make } = countingLookups({ signingKeyCacheMs: DEFAULT_SIGNING_KEY_CACHE_MS });
  const stack = await startGatewayStack({ gatewayOverrides: make });
  t.teardown(() => stack.close());
  const ghost = randomUUID();
  const statuses = await flood(stack, 300, (n) => event(ghost, n));
  t.deepEqual([...statuses], [[404, 300]]);
  t.is(counter.lookups, 1);
});

test("failures are charged to their source, not to the server they name: a source past its limit gets 429 with Retry-After and no lookup; another source's correctly signed request for that server is answered", async (t) => {
  const { counter, make } = countingLookups({ signingKeyCacheMs: 0, trustProxy: true, failedSignatures: { perSource: 5, global: 0, windowMs: 60_000 } });
  const stack = await startGatewayStack({ gatewayOverrides: make });
  t.teardown(() => stack.close());
  const target = await stack.createServer();
  const forger = { headers: { "x-forwarded-for": "203.0.113.9" } };
  const before = counter.lookups;
  const statuses = new Map<number, number>();
  for (let n = 0; n < 50; n++) {
    const res = await stack.postSigned({ secret: "rsec_forged" }, event(target.serverId, n), forger);
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
  }
  t.deepEqual(
    [...statuses],
    [
      [401, 5],
      [429, 45],
    ],
  );
  t.is(counter.lookups - before, 5);
  const limited = await stack.postSigned(target, event(target.serverId, 99), forger);
  t.is(limited.status, 429, "the source's own correctly signed request waits too: it shares the address");
  t.deepEqual(JSON.parse(limited.text), { error: "too many failed signature checks; retry after the Retry-After delay" });
  const retryAfter = Number(limited.headers.get("retry-after"));
  t.true(retryAfter >= 1 && retryAfter <= 60, `Retry-After: ${retryAfter}`);
  t.is((await stack.postSigned(target, event(target.serverId, 1), { headers: { "x-forwarded-for": "198.51.100.1" } })).status, 200);
});

test("forgeries spread over random server ids stop at the global limit: no lookups past it", async (t) => {
  // With the key cache off no lookup is bounded per server, so every id meets the global limit.
  const { counter, make } = countingLookups({ signingKeyCacheMs: 0, failedSignatures: { perSource: 0, global: 20, windowMs: 60_000 } });
  const stack = await startGatewayStack({ gatewayOverrides: make });
  t.teardown(() => stack.close());
  const before = counter.lookups;
  const statuses = await flood(stack, 200, () => event(randomUUID(), 0));
  t.is(statuses.get(404), 20);
  t.is(statuses.get(429), 180);
  t.is(counter.lookups - before, 20);
});

/** Gateway deps that count both key lookups (ingest's ResolveSigningKeys, pull's ResolvePullKeys). */
function countingBothLookups(overrides: Partial<GatewayDeps>) {
  const counter = { ingest: 0, pull: 0 };
  const make = ({ clients }: { clients: ReferralServiceClients }): Partial<GatewayDeps> => ({
    admin: {
      ...clients.admin,
      resolveSigningKeys: (...args: Parameters<typeof clients.admin.resolveSigningKeys>) => {
        counter.ingest++;
        return clients.admin.resolveSigningKeys(...args);
      },
      resolvePullKeys: (...args: Parameters<typeof clients.admin.resolvePullKeys>) => {
        counter.pull++;
        return clients.admin.resolvePullKeys(...args);
      },
    },
    ...overrides,
  });
  return { counter, make };
}

async function postPull(stack: GatewayStack, secret: string, body: unknown, source: string): Promise<RawResponse> {
  const raw = JSON.stringify(body);
  const res = await fetch(`${stack.baseUrl}/api/pull/hearts`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-service-signature": formatIngestSignature(secret, Math.floor(Date.now() / 1000), raw),
      "x-forwarded-for": source,
    },
    body: raw,
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

test("forgeries never get correctly signed traffic refused: a flood of random ids from many sources and of the honest server's own id (ingest and pull) while its sender goes on; lookups stay bounded", async (t) => {
  const limits = { perSource: 50, global: 200, windowMs: 60_000 };
  // Production's key cache (1 s) and refresh interval, behind a proxy so each request has its own source.
  const { counter, make } = countingBothLookups({ signingKeyCacheMs: DEFAULT_SIGNING_KEY_CACHE_MS, trustProxy: true, failedSignatures: limits });
  const stack = await startGatewayStack({ gatewayOverrides: make });
  t.teardown(() => stack.close());
  const honest = await stack.createServer();
  await stack.clients.admin.setPullEnabled({ serverId: honest.serverId, enabled: true });
  const { secret: pullSecret } = await stack.clients.admin.revealPullSecret({ serverId: honest.serverId });
  const honestSource = { "x-forwarded-for": "198.51.100.1" };
  const sendHonest = async (n: number) => [
    await stack.postSigned(honest, event(honest.serverId, n), { headers: honestSource }),
    await postPull(stack, pullSecret, { server_id: honest.serverId, limit: 1 }, honestSource["x-forwarded-for"]),
  ];
  for (const res of await sendHonest(0)) t.is(res.status, 200, res.text);
  const before = { ...counter };

  // The honest sender goes on, one ingest event and one pull every 40 ms, across several key cache lifetimes.
  const honestStatuses = new Map<number, number>();
  let flooding = true;
  const honestLoop = (async () => {
    const until = Date.now() + 3_500;
    for (let n = 1; flooding || Date.now() < until; n++) {
      for (const res of await sendHonest(n)) honestStatuses.set(res.status, (honestStatuses.get(res.status) ?? 0) + 1);
      await new Promise((resolve) => setTimeout(resolve, 40));
    }
  })();

  const forgedStatuses = new Map<number, number>();
  const count = (res: RawResponse) => forgedStatuses.set(res.status, (forgedStatuses.get(res.status) ?? 0) + 1);
  const forge = (source: string, n: number, serverId: string) =>
    stack.postSigned({ secret: "rsec_forged" }, event(serverId, n), { headers: { "x-forwarded-for": source } });
  const started = Date.now();
  for (let i = 0; i < 200; i += 25) {
    const batch = Array.from({ length: 25 }, (_, j) => [
      // Random server ids from six sources (each past its own limit; together past the global one).
      forge(`203.0.113.${(i + j) % 6}`, i + j, randomUUID()),
      forge(`203.0.113.${(i + j + 3) % 6}`, i + j, randomUUID()),
      // The honest server's own id (public in every /r/ link), on ingest and pull.
      forge("203.0.113.100", i + j, honest.serverId),
      postPull(stack, "psec_forged", { server_id: honest.serverId }, "203.0.113.101"),
    ]).flat();
    for (const res of await Promise.all(batch)) count(res);
  }
  flooding = false;
  await honestLoop;
  const seconds = (Date.now() - started) / 1000;

  const honestTotal = [...honestStatuses.values()].reduce((a, b) => a + b, 0);
  t.true(honestTotal >= 10, `the honest sender went on during the flood: ${honestTotal} requests`);
  t.deepEqual([...honestStatuses], [[200, honestTotal]], "no correctly signed request was refused");
  t.true((forgedStatuses.get(429) ?? 0) > 0, `the forgers met the limits: ${JSON.stringify([...forgedStatuses])}`);
  // Forgeries of random ids cost at most the global budget; the honest server's id, forged or not, at most a
  // lookup per key cache lifetime and one per refresh interval, per purpose.
  const ingestLookups = counter.ingest - before.ingest;
  const pullLookups = counter.pull - before.pull;
  t.true(ingestLookups + pullLookups <= limits.global + 4 * Math.ceil(seconds + 1), `lookups: ingest ${ingestLookups}, pull ${pullLookups} in ${seconds} s`);
  t.true(pullLookups <= 2 * Math.ceil(seconds + 1), `pull lookups: ${pullLookups}`);
  t.log(
    `forged: ${JSON.stringify([...forgedStatuses])}; honest: ${honestTotal}; lookups: ingest ${ingestLookups}, pull ${pullLookups} in ${seconds.toFixed(1)} s`,
  );
});

test(`a server holds at most ${MAX_ACTIVE_SECRETS_PER_SERVER} active referral secrets: the RPC refuses more with a clear error; revoking frees a slot`, async (t) => {
  const stack = await startGatewayStack();
  t.teardown(() => stack.close());
  const server = await stack.createServer();
  for (let i = 1; i < MAX_ACTIVE_SECRETS_PER_SERVER; i++) await stack.clients.admin.createReferralSecret({ serverId: server.serverId });
  for (const call of [
    () => stack.clients.admin.createReferralSecret({ serverId: server.serverId }),
    () => stack.clients.admin.rotateReferralSecret({ serverId: server.serverId }),
  ]) {
    const error = await call().then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    t.is(error?.code, Code.FailedPrecondition);
    t.is(error?.rawMessage, `too many active referral secrets (at most ${MAX_ACTIVE_SECRETS_PER_SERVER}): revoke one, or let a rotated one expire, first`);
  }
  await stack.clients.admin.revokeReferralSecret({ serverId: server.serverId, kid: server.kid });
  t.truthy((await stack.clients.admin.createReferralSecret({ serverId: server.serverId })).secret);
});
