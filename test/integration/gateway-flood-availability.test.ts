/**
 * Availability under forged floods (issue 33): a server's id is public (it is in every referral link), so
 * anyone can forge requests that name it. Whatever other senders forge, a correctly signed request is never
 * refused: the production key cache lifetime and limits, the gateway behind a proxy (each request's source
 * is its `X-Forwarded-For`), and the gateway's clock injected so "30 s of silence" takes no 30 s. Two
 * settings differ from production, to keep the file fast and its outcome certain on a slow machine: the
 * limits' window is 10 minutes (so every budget the flood spent is still spent when the backends send),
 * and a server's lookups are spaced 250 ms apart instead of 1 s (forgeries for a real server wait for
 * the next lookup: with 64 in flight, 1 s would make 1,600 of them take 25 s).
 */
import test from "ava";
import { randomUUID } from "node:crypto";
import { DEFAULT_SIGNING_KEY_CACHE_MS } from "../../gateway/signing-key-cache.js";
import { startGatewayStack, type RawResponse, type TestServer } from "./gateway-stack.js";

const RANDOM_ID_FORGERIES = 7_000;
const FORGERIES_PER_REAL_SERVER = 800;
const IN_FLIGHT = 64;
/** The honest backends' own address (no forger uses it). */
const BACKEND_SOURCE = "198.51.100.7";

/** The gateway's clock: the wall clock plus an offset the test moves forward. */
function offsetClock() {
  let offsetMs = 0;
  return {
    now: () => new Date(Date.now() + offsetMs),
    advance(ms: number) {
      offsetMs += ms;
    },
  };
}

/** Sends every request of `requests`, at most IN_FLIGHT at once; counts the answers by status. */
async function sendBounded(requests: Array<() => Promise<RawResponse>>): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const send = requests[next++] as () => Promise<RawResponse>;
      const res = await send();
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return statuses;
}

const dryRun = (serverId: string, n: number) => ({
  event: "registered",
  token: "t",
  server_id: serverId,
  referee_identity: "p",
  server_event_id: `dry-${n}`,
  test: true,
});

/**
 * The flood and what follows it, from `sources` forger addresses: 800 forgeries for each of two real servers -
 * one whose backend sent before the flood, one the gateway never saw - then 7,000 for random server ids; then
 * each real server's backend (and that of a third server nobody named yet) sends a signed dry-run and a signed
 * `registered` at once, after a rotation of its secret, after 2 s and after 30 s of silence.
 */
async function floodThenSendSigned(t: import("ava").ExecutionContext, sources: number): Promise<void> {
  const clock = offsetClock();
  const stack = await startGatewayStack({
    gatewayOverrides: () => ({
      signingKeyCacheMs: DEFAULT_SIGNING_KEY_CACHE_MS,
      signingKeyRefreshMs: 250,
      failedSignatures: { windowMs: 600_000 },
      trustProxy: true,
      now: clock.now,
    }),
  });
  t.teardown(() => stack.close());
  const sign = (server: Pick<TestServer, "secret" | "kid">, body: unknown) =>
    stack.postSigned(server, body, { t: Math.floor(clock.now().getTime() / 1000), kid: server.kid, headers: { "x-forwarded-for": BACKEND_SOURCE } });

  const seen = await stack.createServer();
  t.is((await sign(seen, dryRun(seen.serverId, 0))).status, 200, "the seen server's backend sent before the flood");
  const unseen = await stack.createServer();
  const forge = (n: number, serverId: string) => () =>
    stack.postSigned({ secret: "rsec_forged" }, dryRun(serverId, n), {
      t: Math.floor(clock.now().getTime() / 1000),
      headers: { "x-forwarded-for": `203.0.113.${n % sources}` },
    });
  // The real servers' forgeries first, so each meets every budget still unspent.
  const floodStarted = Date.now();
  const forged = await sendBounded([
    ...Array.from({ length: FORGERIES_PER_REAL_SERVER }, (_, n) => forge(n, seen.serverId)),
    ...Array.from({ length: FORGERIES_PER_REAL_SERVER }, (_, n) => forge(n, unseen.serverId)),
    ...Array.from({ length: RANDOM_ID_FORGERIES }, (_, n) => forge(n, randomUUID())),
  ]);
  t.log(`forged answers from ${sources} address(es) in ${((Date.now() - floodStarted) / 1000).toFixed(1)} s: ${JSON.stringify([...forged])}`);
  t.false(forged.has(200), "no forgery got through");
  t.true((forged.get(429) ?? 0) > 0, `the forgers spent a budget: ${sources === 1 ? "their address's" : "the global one"}`);
  const named = await stack.createServer();

  const servers: Record<string, TestServer> = { seen, unseen, named };
  const answers: string[] = [];
  const expected: string[] = [];
  let n = 0;
  const sendBoth = async (when: string) => {
    for (const [name, server] of Object.entries(servers)) {
      const token = await stack.click(server.serverId);
      const registered = { event: "registered", token, server_id: server.serverId, referee_identity: `p-${++n}`, server_event_id: `reg-${n}` };
      for (const [kind, res] of [
        ["dry-run", await sign(server, dryRun(server.serverId, ++n))],
        ["registered", await sign(server, registered)],
      ] as const) {
        answers.push(`${name} ${kind} ${when}: ${res.status} ${res.status === 200 ? "" : res.text}`.trim());
        expected.push(`${name} ${kind} ${when}: 200`);
      }
    }
  };
  await sendBoth("at once");
  for (const [name, server] of Object.entries(servers)) {
    const rotated = await stack.clients.admin.rotateReferralSecret({ serverId: server.serverId });
    servers[name] = { serverId: server.serverId, secret: rotated.secret, kid: rotated.info?.kid ?? "" };
  }
  await sendBoth("with the rotated secret");
  clock.advance(2_000);
  await sendBoth("after 2 s of silence");
  clock.advance(28_000);
  await sendBoth("after 30 s of silence");
  t.log(`the backends' requests took ${((Date.now() - floodStarted) / 1000).toFixed(1)} s from the flood's start`);
  t.deepEqual(answers, expected);
}

test.serial(
  "forgeries from one address never get a correctly signed request refused: 800 for each of two real servers (one never seen) and 7,000 for random ids, then signed requests at once, after a rotation, after 2 s and 30 s",
  async (t) => {
    await floodThenSendSigned(t, 1);
  },
);

test.serial(
  "forgeries from 256 addresses never get a correctly signed request refused: 800 for each of two real servers (one never seen) and 7,000 for random ids, then signed requests at once, after a rotation, after 2 s and 30 s",
  async (t) => {
    await floodThenSendSigned(t, 256);
  },
);
