import test from "ava";
import { startGatewayStack, type GatewayStack, type TestServer } from "./gateway-stack.js";

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

/**
 * Waits out the cache lifetime from now, just after a change committed: a cached answer is as old as the lookup that
 * fetched it, which started before the change if it saw the old state, so none of those is still fresh by then. The
 * check after it is one request, not a deadline on the machine's speed (a loaded machine only makes the wait longer).
 */
const cacheLifetimePassed = () => new Promise((resolve) => setTimeout(resolve, CACHE_MS + 50));

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
  await stack.clients.admin.revokeReferralSecret({ serverId: server.serverId, kid: created.info!.kid });
  await cacheLifetimePassed();
  t.is((await dryRun(created.secret)).status, 401, "refused once the cache lifetime has passed since the revocation");
  t.is((await dryRun(server.secret)).status, 200, "the other secret still verifies");
});

test.serial("with the key cache, disabling referrals answers 404 within the cache lifetime", async (t) => {
  t.is((await dryRun(server.secret)).status, 200);
  await stack.clients.admin.setReferralsEnabled({ serverId: server.serverId, enabled: false });
  await cacheLifetimePassed();
  t.is((await dryRun(server.secret)).status, 404, "refused once the cache lifetime has passed since referrals were turned off");
  await stack.clients.admin.setReferralsEnabled({ serverId: server.serverId, enabled: true });
  t.is((await dryRun(server.secret)).status, 200, "re-enabled: unknown/disabled answers are not cached");
});
