import test from "ava";
import { startGatewayStack, type GatewayStack, type TestServer } from "./gateway-stack.js";
import { eventually } from "../helpers/eventually.js";

const CACHE_MS = 1_500;
let stack: GatewayStack;
let server: TestServer;

test.before(async () => {
  stack = await startGatewayStack({ gatewayOverrides: () => ({ signingKeyCacheMs: CACHE_MS }) });
  server = await stack.createServer();
});
test.after.always(async () => {
  await stack?.close();
});

const dryRun = (secret: string) =>
  stack.postSigned(
    { secret },
    {
      event: "registered",
      token: "t",
      server_id: server.serverId,
      referee_identity: "p",
      server_event_id: "e",
      test: true,
    },
  );

test.serial("with the key cache, a secret created after the keys were cached verifies at once (a failed MAC re-asks once)", async (t) => {
  t.is((await dryRun(server.secret)).status, 200, "keys now cached");
  const created = await stack.clients.admin.createReferralSecret({ serverId: server.serverId });
  const res = await dryRun(created.secret);
  t.is(res.status, 200);
  t.is(res.text, '{"ok":true,"test":true}');
});

test.serial("with the key cache, a revoked secret stops verifying within the cache lifetime", async (t) => {
  const created = await stack.clients.admin.createReferralSecret({ serverId: server.serverId });
  t.is((await dryRun(created.secret)).status, 200, "keys now cached");
  const revokedAt = Date.now();
  await stack.clients.admin.revokeReferralSecret({ serverId: server.serverId, kid: created.info!.kid });
  await eventually(async () => (await dryRun(created.secret)).status === 401, { timeoutMs: CACHE_MS + 2_000 });
  t.true(Date.now() - revokedAt <= CACHE_MS + 1_000, "no longer than the cache lifetime (plus scheduling slack)");
  t.is((await dryRun(server.secret)).status, 200, "the other secret still verifies");
});

test.serial("with the key cache, disabling referrals answers 404 within the cache lifetime", async (t) => {
  t.is((await dryRun(server.secret)).status, 200);
  await stack.clients.admin.setReferralsEnabled({ serverId: server.serverId, enabled: false });
  await eventually(async () => (await dryRun(server.secret)).status === 404, { timeoutMs: CACHE_MS + 2_000 });
  await stack.clients.admin.setReferralsEnabled({ serverId: server.serverId, enabled: true });
  t.is((await dryRun(server.secret)).status, 200, "re-enabled: unknown/disabled answers are not cached");
});
