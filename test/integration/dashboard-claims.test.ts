/**
 * The dashboard API's claim-ledger routes (operator sign-in, through the real gateway and referral
 * service): mint, reveal and rotate the claim key, set the hold window and cap, and the Hearts list's
 * platform ids, claim state and `claim` filter.
 */
import anyTest, { type TestFn } from "ava";
import { createLogger } from "../../services/shared/runtime/log.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";

const DASHBOARD_TOKEN = "dash-claims-test-token-0123456789abcdef";
const UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36";

interface Context {
  stack: TestStack;
  gatewayUrl: string;
  serverId: string;
}
const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const stack = await startStack({ gateway: false, log: createLogger("dashboard-claims", process.env.TEST_LOG_LEVEL ?? "silent") });
  const gateway = await stack.startGateway({ dashboard: { token: DASHBOARD_TOKEN } });
  const created = await stack.clients.admin.createServer({ name: "claims-dash", registrationUrl: "" });
  t.context = { stack, gatewayUrl: gateway.url, serverId: created.server?.id ?? "" };
});
test.after.always(async (t) => {
  await t.context.stack?.close();
});

async function api(t: { context: Context }, method: string, path: string, body?: unknown) {
  const res = await fetch(`${t.context.gatewayUrl}/dashboard/api/servers/${t.context.serverId}${path}`, {
    method,
    headers: { authorization: `Bearer ${DASHBOARD_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  // biome-ignore lint/suspicious/noExplicitAny: JSON answers, checked field by field with t.like
  return { status: res.status, json: (await res.json()) as Record<string, any> };
}

test.serial("claim key: reveal is 404 before a key; mint (rotate) shows it once, reveal again; the server reports the ledger on", async (t) => {
  t.is((await api(t, "POST", "/claim-secret/reveal")).status, 404);
  t.like((await api(t, "GET", "")).json.server.claims, { claim_key_set: false, hold_days: 30, max_held_per_player: 20 });
  const minted = await api(t, "POST", "/claim-secret/rotate", {});
  t.is(minted.status, 201);
  t.regex(minted.json.value, /^vck_[A-Za-z0-9_-]{43}$/);
  const revealed = await api(t, "POST", "/claim-secret/reveal");
  t.is(revealed.json.value, minted.json.value);
  t.like((await api(t, "GET", "")).json.server.claims, { claim_key_set: true });
});

test.serial("claim settings: PUT /claims sets the hold window and the cap; out of range is 400 naming the field", async (t) => {
  const saved = await api(t, "PUT", "/claims", { hold_days: 7, max_held_per_player: 3 });
  t.is(saved.status, 200);
  t.like(saved.json.server.claims, { hold_days: 7, max_held_per_player: 3 });
  const bad = await api(t, "PUT", "/claims", { hold_days: 91 });
  t.is(bad.status, 400);
  t.regex(bad.json.error, /^hold_days /);
});

test.serial("the Hearts list carries platform ids and the claim state, and ?claim= filters by it", async (t) => {
  const { stack, serverId } = t.context;
  const cast = await stack.clients.hearts.castHeart({
    serverId,
    voterIdentity: "v-1",
    username: "Rusty",
    ip: "192.0.2.10",
    userAgent: UA,
    steamId: "76561198012345678",
  });
  const held = await api(t, "GET", "/hearts?claim=held");
  t.is(held.status, 200);
  t.is(held.json.hearts.length, 1);
  t.like(held.json.hearts[0], {
    heart_id: cast.heartId,
    steam_id: "76561198012345678",
    discord_id: null,
    claim: { state: "held", expired_reason: null, claimed_at: null },
  });
  t.deepEqual((await api(t, "GET", "/hearts?claim=expired")).json.hearts, []);
  t.is((await api(t, "GET", "/hearts?claim=lost")).status, 400);
});
