/** ServerAdminService: the Votifier v2 settings (token sealed, never returned) and the pull API switch and secrets. */
import anyTest, { type TestFn } from "ava";
import { Code } from "@connectrpc/connect";
import { toJsonString } from "@bufbuild/protobuf";
import { PullKeyStatus, ServerSchema } from "../../gen/proto/servers/v1/servers_pb.js";
import { errorDetails, rpcError, startHarness, type Harness } from "../../scripts/harness/referral-harness.js";

const test = anyTest as TestFn<{ h: Harness; dev: Harness }>;

test.before(async (t) => {
  [t.context.h, t.context.dev] = await Promise.all([startHarness(), startHarness({ allowInsecureCallbacks: true })]);
});
test.after.always(async (t) => {
  await Promise.all([t.context.h?.close(), t.context.dev?.close()]);
});

async function newServer(h: Harness): Promise<string> {
  const { server } = await h.admin.createServer({ name: "Votes" });
  return server?.id ?? "";
}

const settings = { host: "votes.example.org", port: 8192, token: "7kq2m9x4hd8s3v1c6p0w5r2n8b", serviceName: "HeartsList" };

test("SetVotifierSettings stores the settings with the token sealed; no RPC returns the token, only that one is set", async (t) => {
  const { h } = t.context;
  const serverId = await newServer(h);
  const { server } = await h.admin.setVotifierSettings({ serverId, ...settings });
  t.like(server, { votifierHost: "votes.example.org", votifierPort: 8192, votifierServiceName: "HeartsList", votifierTokenSet: true });
  const row = await h.db.prisma.server.findUniqueOrThrow({ where: { id: serverId } });
  t.not(row.votifierToken, settings.token);
  t.false(row.votifierToken?.includes(settings.token));
  t.is(h.deps.secretBox.open(row.votifierToken ?? ""), settings.token);
  const servers = [...(await h.admin.listServers({})).servers, (await h.admin.getServer({ serverId })).server!];
  const listed = servers.map((s) => toJsonString(ServerSchema, s)).join("\n");
  t.true(listed.includes("votifierTokenSet"));
  t.false(listed.includes(settings.token));
});

test("an empty token keeps the stored one (a first setup needs one); an empty host turns Votifier off and forgets the token", async (t) => {
  const { h } = t.context;
  const serverId = await newServer(h);
  t.like(errorDetails(await rpcError(h.admin.setVotifierSettings({ serverId, ...settings, token: "" }))), {
    code: Code.InvalidArgument,
    message: "votifier token is required",
  });
  await h.admin.setVotifierSettings({ serverId, ...settings });
  const { server } = await h.admin.setVotifierSettings({ serverId, ...settings, port: 8193, token: "" });
  t.like(server, { votifierPort: 8193, votifierTokenSet: true });
  t.is(h.deps.secretBox.open((await h.db.prisma.server.findUniqueOrThrow({ where: { id: serverId } })).votifierToken ?? ""), settings.token);
  const off = await h.admin.setVotifierSettings({ serverId, host: "", port: 0, token: "", serviceName: "" });
  t.like(off.server, { votifierHost: "", votifierPort: 0, votifierServiceName: "", votifierTokenSet: false });
  t.is((await h.db.prisma.server.findUniqueOrThrow({ where: { id: serverId } })).votifierToken, null);
});

test("SetVotifierSettings refuses bad input with texts that name the field and never echo the value", async (t) => {
  const { h } = t.context;
  const serverId = await newServer(h);
  const cases: Array<[Partial<typeof settings>, string]> = [
    [{ host: "votes example" }, "votifier host must be a host name or an IP address"],
    [{ host: "https://votes.example.org" }, "votifier host must be a host name or an IP address"],
    [{ port: 0 }, "votifier port must be between 1 and 65535"],
    [{ port: 70000 }, "votifier port must be between 1 and 65535"],
    [{ serviceName: " " }, "votifier service_name is required"],
    [{ serviceName: "x".repeat(65) }, "votifier service_name must be at most 64 printable characters"],
    [{ token: "has space" }, "votifier token must be at most 256 characters without spaces"],
    [{ host: "localhost" }, "votifier host must not point to localhost"],
    [{ host: "127.0.0.1" }, "votifier host must not point to a loopback, private, link-local, metadata or other special-purpose address"],
    [{ host: "169.254.169.254" }, "votifier host must not point to a loopback, private, link-local, metadata or other special-purpose address"],
    [{ host: "[::1]" }, "votifier host must not point to a loopback, private, link-local, metadata or other special-purpose address"],
    [{ host: "10.1.2.3" }, "votifier host must not point to a loopback, private, link-local, metadata or other special-purpose address"],
  ];
  for (const [override, message] of cases) {
    t.like(
      errorDetails(await rpcError(h.admin.setVotifierSettings({ serverId, ...settings, ...override }))),
      { code: Code.InvalidArgument, message },
      JSON.stringify(override),
    );
  }
  t.like(errorDetails(await rpcError(h.admin.setVotifierSettings({ ...settings, serverId: "5b0f8c4e-2d1a-4e3b-9c7d-6a5f4e3d2c1b" }))), {
    code: Code.NotFound,
    message: "unknown server",
  });
});

test("with ALLOW_INSECURE_CALLBACKS a loopback Votifier host is allowed (development)", async (t) => {
  const { dev } = t.context;
  const serverId = await newServer(dev);
  const { server } = await dev.admin.setVotifierSettings({ serverId, ...settings, host: "127.0.0.1" });
  t.is(server?.votifierHost, "127.0.0.1");
});

test("SetPullEnabled(true) creates one pull secret (psec_); ResolvePullKeys answers OK with it; off -> PULL_DISABLED", async (t) => {
  const { h } = t.context;
  const serverId = await newServer(h);
  t.is((await h.admin.resolvePullKeys({ serverId })).status, PullKeyStatus.PULL_DISABLED);
  t.like(errorDetails(await rpcError(h.admin.revealPullSecret({ serverId }))), { code: Code.NotFound, message: "no pull secret" });
  const [a, b] = await Promise.all([h.admin.setPullEnabled({ serverId, enabled: true }), h.admin.setPullEnabled({ serverId, enabled: true })]);
  t.true(a.server?.pullEnabled && b.server?.pullEnabled);
  t.is(await h.db.prisma.serverSecret.count({ where: { serverId, purpose: "pull" } }), 1, "two concurrent enables create one secret");
  const { secret, info } = await h.admin.revealPullSecret({ serverId });
  t.regex(secret, /^psec_[A-Za-z0-9_-]{43}$/);
  const resolved = await h.admin.resolvePullKeys({ serverId });
  t.is(resolved.status, PullKeyStatus.OK);
  t.deepEqual(
    resolved.keys.map((k) => [k.kid, Buffer.from(k.secret).toString("utf8")]),
    [[info?.kid, secret]],
  );
  await h.admin.setPullEnabled({ serverId, enabled: false });
  t.is((await h.admin.resolvePullKeys({ serverId })).status, PullKeyStatus.PULL_DISABLED);
  t.is((await h.admin.resolvePullKeys({ serverId: "nope" })).status, PullKeyStatus.UNKNOWN_SERVER);
});
