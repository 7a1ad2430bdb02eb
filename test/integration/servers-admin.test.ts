/** ServerAdminService: servers, registration URL, callback settings and the callback secret. */
import anyTest, { type TestFn } from "ava";
import { Code } from "@connectrpc/connect";
import { DEFAULT_ROTATION_GRACE_SECONDS } from "../../services/servers/domain/secret-policy.js";
import { errorDetails, rpcError, startHarness, type Harness } from "../../scripts/harness/referral-harness.js";

const test = anyTest as TestFn<{ h: Harness; dev: Harness }>;

test.before(async (t) => {
  [t.context.h, t.context.dev] = await Promise.all([startHarness(), startHarness({ allowInsecureCallbacks: true })]);
});
test.after.always(async (t) => {
  await Promise.all([t.context.h?.close(), t.context.dev?.close()]);
});

async function newServer(h: Harness, name = "S"): Promise<string> {
  const { server } = await h.admin.createServer({ name });
  if (!server) throw new Error("no server");
  return server.id;
}

test("CreateServer trims the name, starts with referrals off and no callback; GetServer and ListServers return it", async (t) => {
  const { h } = t.context;
  const { server } = await h.admin.createServer({ name: "  Craftland  ", registrationUrl: "https://craft.example/register" });
  t.like(server, { name: "Craftland", referralsEnabled: false, registrationUrl: "https://craft.example/register", callbackUrl: "", standardWebhooks: false });
  t.truthy(server?.createdAt);
  t.like((await h.admin.getServer({ serverId: server?.id ?? "" })).server, { id: server?.id, name: "Craftland" });
  t.true((await h.admin.listServers({})).servers.some((s) => s.id === server?.id));
});

test("CreateServer refuses an empty name and a registration URL that is not http(s)", async (t) => {
  const { h } = t.context;
  t.like(errorDetails(await rpcError(h.admin.createServer({ name: "  " }))), { code: Code.InvalidArgument, message: "name is required" });
  t.like(errorDetails(await rpcError(h.admin.createServer({ name: "x", registrationUrl: "ftp://x.example/" }))), {
    code: Code.InvalidArgument,
    message: "registration_url must use http or https",
  });
  t.like(errorDetails(await rpcError(h.admin.createServer({ name: "x", registrationUrl: "not a url" }))), {
    code: Code.InvalidArgument,
    message: "registration_url is not a valid URL",
  });
});

test("a URL with port 0 is refused by every setting that takes one (callback URL, endpoint URL, registration URL, Votifier port), with and without the development flag, naming the field", async (t) => {
  for (const h of [t.context.h, t.context.dev]) {
    const serverId = await newServer(h);
    const { endpoint } = await h.admin.createEndpoint({ serverId, url: "https://hooks.example/ok", eventTypes: ["heart.counted"] });
    const refusals: Array<[string, Promise<unknown>, string]> = [
      ["SetCallbackSettings", h.admin.setCallbackSettings({ serverId, callbackUrl: "https://hooks.example:0/hook" }), "callback_url"],
      ["CreateEndpoint", h.admin.createEndpoint({ serverId, url: "https://hooks.example:0/hook", eventTypes: ["heart.counted"] }), "callback_url"],
      ["UpdateEndpoint", h.admin.updateEndpoint({ serverId, endpointId: endpoint!.id, url: "https://hooks.example:00/hook" }), "callback_url"],
      ["CreateServer", h.admin.createServer({ name: "x", registrationUrl: "https://game.example:0/register" }), "registration_url"],
      ["SetRegistrationUrl", h.admin.setRegistrationUrl({ serverId, registrationUrl: "http://game.example:0/" }), "registration_url"],
    ];
    for (const [rpc, call, field] of refusals) {
      t.like(errorDetails(await rpcError(call)), { code: Code.InvalidArgument, message: `${field} must not use port 0` }, rpc);
    }
    t.like(errorDetails(await rpcError(h.admin.setVotifierSettings({ serverId, host: "mc.example", port: 0, serviceName: "list" }))), {
      code: Code.InvalidArgument,
      message: "votifier port must be between 1 and 65535",
    });
    // An explicit real port is kept.
    t.is(
      (await h.admin.setCallbackSettings({ serverId, callbackUrl: "https://hooks.example:8443/hook" })).server?.callbackUrl,
      "https://hooks.example:8443/hook",
    );
  }
});

test("GetServer of an unknown or malformed id -> NotFound unknown server", async (t) => {
  const { h } = t.context;
  for (const serverId of ["00000000-0000-4000-8000-000000000000", "x"]) {
    t.like(errorDetails(await rpcError(h.admin.getServer({ serverId }))), { code: Code.NotFound, message: "unknown server" });
  }
});

test("SetReferralsEnabled toggles referrals; unknown server -> NotFound", async (t) => {
  const { h } = t.context;
  const serverId = await newServer(h);
  t.true((await h.admin.setReferralsEnabled({ serverId, enabled: true })).server?.referralsEnabled);
  t.false((await h.admin.setReferralsEnabled({ serverId, enabled: false })).server?.referralsEnabled);
  t.is((await rpcError(h.admin.setReferralsEnabled({ serverId: "00000000-0000-4000-8000-000000000000", enabled: true }))).code, Code.NotFound);
});

test("SetRegistrationUrl validates an http(s) URL (http allowed: the page is public) and an empty value clears it", async (t) => {
  const { h } = t.context;
  const serverId = await newServer(h);
  t.is(
    (await h.admin.setRegistrationUrl({ serverId, registrationUrl: "http://game.example/join?a=1" })).server?.registrationUrl,
    "http://game.example/join?a=1",
  );
  t.is((await rpcError(h.admin.setRegistrationUrl({ serverId, registrationUrl: "javascript:alert(1)" }))).code, Code.InvalidArgument);
  t.is((await h.admin.setRegistrationUrl({ serverId, registrationUrl: "" })).server?.registrationUrl, "");
});

test("callback URL: https required, http refused without the development flag", async (t) => {
  const { h } = t.context;
  const serverId = await newServer(h);
  t.like(errorDetails(await rpcError(h.admin.setCallbackSettings({ serverId, callbackUrl: "http://hooks.example/cb" }))), {
    code: Code.InvalidArgument,
    message: "callback_url must use https",
  });
  t.is((await h.admin.setCallbackSettings({ serverId, callbackUrl: "https://hooks.example/cb" })).server?.callbackUrl, "https://hooks.example/cb");
});

test("callback URL: loopback, private, link-local and metadata literals and localhost are refused without the flag", async (t) => {
  const { h } = t.context;
  const serverId = await newServer(h);
  for (const callbackUrl of [
    "https://127.0.0.1/cb",
    "https://10.0.0.1/cb",
    "https://169.254.169.254/",
    "https://[::1]/cb",
    "https://[fd00:ec2::254]/",
    "https://localhost/cb",
    "https://[::ffff:192.168.0.1]/",
  ]) {
    t.is((await rpcError(h.admin.setCallbackSettings({ serverId, callbackUrl }))).code, Code.InvalidArgument, callbackUrl);
  }
  t.is(await h.db.prisma.callbackEndpoint.count({ where: { serverId, url: { not: null } } }), 0);
});

test("callback URL: the development flag (allowInsecureCallbacks) allows http and loopback", async (t) => {
  const { dev } = t.context;
  const serverId = await newServer(dev);
  const res = await dev.admin.setCallbackSettings({ serverId, callbackUrl: "http://127.0.0.1:9999/cb", standardWebhooks: true });
  t.like(res.server, { callbackUrl: "http://127.0.0.1:9999/cb", standardWebhooks: true });
});

test("the first callback URL creates one whsec_ callback secret (encrypted at rest); setting the URL again creates no second one", async (t) => {
  const { h } = t.context;
  const serverId = await newServer(h);
  await t.throwsAsync(h.admin.revealCallbackSecret({ serverId }), { message: /no callback secret/ });
  await h.admin.setCallbackSettings({ serverId, callbackUrl: "https://hooks.example/cb" });
  const revealed = await h.admin.revealCallbackSecret({ serverId });
  t.regex(revealed.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  t.like(revealed.info, { active: true });
  await h.admin.setCallbackSettings({ serverId, callbackUrl: "https://hooks.example/other", standardWebhooks: true });
  const rows = await h.db.prisma.serverSecret.findMany({ where: { serverId, purpose: "callback" } });
  t.is(rows.length, 1);
  t.false(rows[0]?.ciphertext.includes(revealed.secret.slice("whsec_".length)));
  t.is((await h.admin.revealCallbackSecret({ serverId })).secret, revealed.secret);
  t.is(await h.db.prisma.serverSecret.count({ where: { serverId, purpose: "referral" } }), 0, "callback secrets are separate from referral secrets");
});

test("concurrent first SetCallbackSettings calls still create exactly one callback secret (server row lock)", async (t) => {
  const { h } = t.context;
  const serverId = await newServer(h);
  await Promise.all(Array.from({ length: 8 }, (_, i) => h.admin.setCallbackSettings({ serverId, callbackUrl: `https://hooks.example/${i}` })));
  t.is(await h.db.prisma.serverSecret.count({ where: { serverId, purpose: "callback" } }), 1);
});

test("setting a callback URL clears callback_disabled_at/reason; EnableCallback clears them too", async (t) => {
  const { h } = t.context;
  const serverId = await newServer(h);
  const disable = () =>
    h.db.prisma.callbackEndpoint.updateMany({ where: { serverId, isDefault: true }, data: { disabledAt: new Date(), disabledReason: "410 Gone" } });
  await disable();
  t.like((await h.admin.getServer({ serverId })).server, { callbackDisabledReason: "410 Gone" });
  const set = await h.admin.setCallbackSettings({ serverId, callbackUrl: "https://hooks.example/cb" });
  t.like(set.server, { callbackDisabledReason: "", callbackDisabledAt: undefined });
  await disable();
  const enabled = await h.admin.enableCallback({ serverId });
  t.like(enabled.server, { callbackDisabledReason: "", callbackDisabledAt: undefined, callbackUrl: "https://hooks.example/cb" });
  t.is((await rpcError(h.admin.enableCallback({ serverId: "00000000-0000-4000-8000-000000000000" }))).code, Code.NotFound);
});

test("an empty callback URL removes the callback", async (t) => {
  const { h } = t.context;
  const serverId = await newServer(h);
  await h.admin.setCallbackSettings({ serverId, callbackUrl: "https://hooks.example/cb" });
  t.is((await h.admin.setCallbackSettings({ serverId, callbackUrl: "" })).server?.callbackUrl, "");
});

test.serial("RotateCallbackSecret: the new secret is revealed as newest; the previous one keeps signing until now + 24 h", async (t) => {
  const { h } = t.context;
  h.clock.set("2024-08-01T00:00:00Z");
  const serverId = await newServer(h);
  await h.admin.setCallbackSettings({ serverId, callbackUrl: "https://hooks.example/cb" });
  const first = await h.admin.revealCallbackSecret({ serverId });
  h.clock.advanceSeconds(5);
  const rotated = await h.admin.rotateCallbackSecret({ serverId });
  t.regex(rotated.secret, /^whsec_/);
  t.not(rotated.secret, first.secret);
  t.is((await h.admin.revealCallbackSecret({ serverId })).secret, rotated.secret);
  const old = await h.db.prisma.serverSecret.findFirstOrThrow({ where: { serverId, purpose: "callback", kid: first.info?.kid ?? "" } });
  t.deepEqual(old.expiresAt, new Date(Date.parse("2024-08-01T00:00:05Z") + DEFAULT_ROTATION_GRACE_SECONDS * 1000));
  const custom = await h.admin.rotateCallbackSecret({ serverId, graceSeconds: 60n });
  const previous = await h.db.prisma.serverSecret.findFirstOrThrow({ where: { serverId, purpose: "callback", kid: rotated.info?.kid ?? "" } });
  t.deepEqual(previous.expiresAt, new Date(Date.parse("2024-08-01T00:00:05Z") + 60_000), "grace_seconds overrides the default");
  t.is((await h.admin.revealCallbackSecret({ serverId })).secret, custom.secret);
});
