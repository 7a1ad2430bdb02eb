/**
 * The check/claim API for reward plugins (gateway/handle-vote-claim.ts) on the real stack: the gateway
 * in front of the referral service's ClaimService on PostgreSQL. Every request is the one a published
 * plugin makes (scripts/harness/plugin-clients.ts: EasyVoteExtended 3.0.4 and 3.2.x, the FiveM script, VoteReward, RocketMod Votifier), every
 * answer is parsed the way that plugin parses it, and every real answer validates against the OpenAPI
 * document. Also: a wrong key answers exactly what an unknown player gets, the wrong-key limiter refuses a
 * guessing source while a key seen working still answers, two claims at once pay once, and the key never
 * reaches a log line or a metric label.
 */
import anyTest, { type TestFn } from "ava";
import { randomBytes } from "node:crypto";
import { createReferralServiceClients } from "../../gateway/clients.js";
import { pluginSetups } from "../../gateway/dashboard/static/plugin-setup.js";
import { captureLog, type CapturedLog } from "./gateway-stack.js";
import { validateAgainstOpenApi, validateTextAgainstOpenApi } from "./openapi-validate.js";
import { startStack, type TestGateway, type TestStack } from "../../scripts/harness/stack.js";
import {
  easyVote304Claim,
  easyVote304Status,
  easyVote304Url,
  easyVoteCheck,
  easyVoteClaim,
  easyVoteStatus,
  fivemCheckVote,
  PLUGIN_PRESETS,
  pluginGet,
  rocketModReward,
  voteRewardQuery,
  withHost,
  type EasyVoteSite,
  type RawHttpAnswer,
  type VrcFile,
} from "../../scripts/harness/plugin-clients.js";

interface Context {
  stack: TestStack;
  gatewayLog: CapturedLog;
  serviceLog: CapturedLog;
  gateway: TestGateway;
}

const test = anyTest as TestFn<Context>;

test.before(async (t) => {
  const serviceLog = captureLog("debug");
  const gatewayLog = captureLog("debug");
  const stack = await startStack({ gateway: false, log: serviceLog.log });
  const gateway = await stack.startGateway({ log: gatewayLog.log, serviceToken: "gateway" });
  t.context = { stack, gatewayLog, serviceLog, gateway };
});

test.after.always(async (t) => {
  await t.context.stack?.close();
});

let seq = 0;
/** A server with a claim key, and a function that casts a counted heart for it with the given platform ids. */
async function serverWithKey(t: { context: Context }) {
  const { clients } = t.context.stack;
  const { server } = await clients.admin.createServer({ name: `Claims ${++seq}` });
  const serverId = server!.id;
  const { claimKey } = await clients.admin.rotateClaimKey({ serverId });
  const vote = async (ids: { username?: string; steamId?: string; discordId?: string; minecraftUuid?: string; accountId?: string }) => {
    seq++;
    const cast = await clients.hearts.castHeart({
      serverId,
      username: ids.username ?? `player${seq}`,
      voterIdentity: `voter-${randomBytes(6).toString("hex")}`,
      ip: `198.51.${seq % 250}.${(seq * 7) % 250}`,
      userAgent: "Mozilla/5.0 claims test",
      steamId: ids.steamId ?? "",
      discordId: ids.discordId ?? "",
      minecraftUuid: ids.minecraftUuid ?? "",
      accountId: ids.accountId ?? "",
    });
    if (!cast.counted) throw new Error(`heart did not count: ${cast.reason}`);
    return cast.heartId;
  };
  return { serverId, claimKey, vote };
}

let steamSeq = 1000;
const newSteamId = () => `7656119800000${++steamSeq}`;

/** Asserts the plugins' byte contract and the document: 200, text/plain, exactly `digit`, no newline. */
function assertDigit(
  t: { is(a: unknown, b: unknown, m?: string): void; deepEqual(a: unknown, b: unknown, m?: string): void },
  res: RawHttpAnswer,
  digit: string,
) {
  t.is(res.status, 200, res.body);
  t.is(res.headers["content-type"], "text/plain");
  t.is(res.headers["content-length"], "1");
  t.is(res.body, digit);
  t.deepEqual(validateTextAgainstOpenApi("/api/votes", "get", res.status, res.body).errors, []);
}

test("EasyVoteExtended (status/claim family, with server={2}), steam id: not voted -> voted -> rewarded once -> already voted", async (t) => {
  const { serverId, claimKey, vote } = await serverWithKey(t);
  const base = t.context.gateway.url;
  const site: EasyVoteSite = {
    statusUrl: `${base}/api/votes?action=status&key={0}&server={2}&steamid={1}`,
    claimUrl: `${base}/api/votes?action=claim&key={0}&server={2}&steamid={1}`,
    usesUsername: false,
  };
  const credentials = `${serverId}:${claimKey}`;
  const player = { steamId: newSteamId(), displayName: "Rusty" };

  t.deepEqual(await easyVoteCheck(site, credentials, player), { kind: "told_not_voted" });
  await vote({ steamId: player.steamId });
  t.deepEqual(await easyVoteCheck(site, credentials, player), { kind: "rewarded" });
  t.deepEqual(await easyVoteCheck(site, credentials, player), { kind: "told_already_voted" });
  t.deepEqual(await easyVoteClaim(site, credentials, player), { kind: "told_already_voted" }, "a repeated claim is 2, never 0");
});

test("EasyVoteExtended's rust-servers.net templates (object=votes check; action=custom and action=post claims), steam id and username", async (t) => {
  const { serverId, claimKey, vote } = await serverWithKey(t);
  const base = t.context.gateway.url;
  const credentials = `${serverId}:${claimKey}`;
  const check = `${base}/api/votes?object=votes&element=claim&key={0}&steamid={1}`;
  const custom: EasyVoteSite = {
    statusUrl: check,
    claimUrl: `${base}/api/votes?action=custom&object=plugin&element=reward&key={0}&steamid={1}`,
    usesUsername: false,
  };
  const post: EasyVoteSite = {
    statusUrl: check,
    claimUrl: `${base}/api/votes?action=post&object=votes&element=claim&key={0}&steamid={1}`,
    usesUsername: false,
  };
  const first = { steamId: newSteamId(), displayName: "A" };
  const second = { steamId: newSteamId(), displayName: "B" };
  await vote({ steamId: first.steamId });
  await vote({ steamId: second.steamId });
  t.deepEqual(await easyVoteCheck(custom, credentials, first), { kind: "rewarded" });
  t.deepEqual(await easyVoteCheck(post, credentials, second), { kind: "rewarded" });
  t.deepEqual(await easyVoteCheck(post, credentials, first), { kind: "told_already_voted" });

  const byName: EasyVoteSite = {
    statusUrl: `${base}/api/votes?object=votes&element=claim&key={0}&username={1}`,
    claimUrl: `${base}/api/votes?action=post&object=votes&element=claim&key={0}&username={1}`,
    usesUsername: true,
  };
  await vote({ username: "Steve Rust-Smith" });
  // Uri.EscapeDataString: "STEVE%20RUST-SMITH"; the name compares case-insensitively.
  t.deepEqual(await easyVoteCheck(byName, credentials, { steamId: newSteamId(), displayName: "STEVE RUST-SMITH" }), { kind: "rewarded" });
});

test("the FiveM script (trackyserver family), steam and discord: vote_not_found -> rewarded -> vote_already_claimed", async (t) => {
  const { claimKey, vote } = await serverWithKey(t);
  const apiUrl = `${t.context.gateway.url}/api/votes`;
  const steamHex = BigInt(newSteamId()).toString(16);
  const steamPlayer = { steam: `steam:${steamHex}`, license: "license:4f2a9c" };
  const steam = { apiUrl, serverKey: claimKey, identifier: "steam" as const };
  t.is(await fivemCheckVote(steam, steamPlayer), "vote_not_found");
  await vote({ steamId: BigInt(`0x${steamHex}`).toString(10) });
  t.is(await fivemCheckVote(steam, steamPlayer), "rewarded");
  t.is(await fivemCheckVote(steam, steamPlayer), "vote_already_claimed");

  const discord = { apiUrl, serverKey: claimKey, identifier: "discord" as const };
  const discordPlayer = { discord: "discord:312345678901234567", license: "license:77aa" };
  t.is(await fivemCheckVote(discord, discordPlayer), "vote_not_found");
  await vote({ discordId: "312345678901234567" });
  t.is(await fivemCheckVote(discord, discordPlayer), "rewarded");
  t.is(await fivemCheckVote(discord, discordPlayer), "vote_already_claimed");
});

test("VoteReward (.vrc on the JSON path, and format=json): lower-cased PHP-urlencoded name, rewarded once, JSON valid against the document", async (t) => {
  const { claimKey, vote } = await serverWithKey(t);
  const base = t.context.gateway.url;
  const vrc: VrcFile = {
    name: "HeartsList",
    website: base,
    check: `${base}/api/votes/json?object=votes&element=claim&key=${claimKey}&username={USERNAME}`,
    claim: `${base}/api/votes/json?action=post&object=votes&element=claim&key=${claimKey}&username={USERNAME}`,
  };
  t.deepEqual(await voteRewardQuery(vrc, "Block Builder"), { kind: "nothing", voted: false, claimed: false });
  await vote({ username: "Block Builder" });
  t.deepEqual(await voteRewardQuery(vrc, "Block Builder"), { kind: "rewarded" });
  t.deepEqual(await voteRewardQuery(vrc, "Block Builder"), { kind: "nothing", voted: true, claimed: true });

  const check = await pluginGet(vrc.check.replace("{USERNAME}", "block+builder"));
  t.is(check.headers["content-type"], "application/json");
  const body = JSON.parse(check.body) as Record<string, unknown>;
  t.like(body, { voted: true, claimed: true, status: "already_claimed" });
  t.regex(String(body.heart_id), /^[0-9a-f-]{36}$/);
  t.truthy(body.voted_at);
  t.truthy(body.claimed_at);
  t.truthy(body.expires_at);
  t.deepEqual(validateAgainstOpenApi("/api/votes/json", "get", 200, body).errors, []);

  await vote({ username: "Second Crafter" });
  const viaFormat: VrcFile = {
    ...vrc,
    check: `${base}/api/votes?format=json&object=votes&element=claim&key=${claimKey}&username={USERNAME}`,
    claim: `${base}/api/votes?format=json&action=post&object=votes&element=claim&key=${claimKey}&username={USERNAME}`,
  };
  t.deepEqual(await voteRewardQuery(viaFormat, "Second Crafter"), { kind: "rewarded" });
  const answer = await pluginGet(viaFormat.check.replace("{USERNAME}", "second+crafter"));
  t.deepEqual(validateAgainstOpenApi("/api/votes", "get", answer.status, JSON.parse(answer.body)).errors, []);
});

test("each plugin's unmodified preset with only the host changed: check 1, claim 1, claim 2 (EasyVoteExtended 3.2.x and 3.0.4, FiveM, VoteReward, RocketMod)", async (t) => {
  const { serverId, claimKey, vote } = await serverWithKey(t);
  const base = t.context.gateway.url;
  const credentials = `${serverId}:${claimKey}`;
  for (const [name, preset] of Object.entries(PLUGIN_PRESETS.easyVote)) {
    const site: EasyVoteSite = { statusUrl: withHost(preset.status, base), claimUrl: withHost(preset.claim, base), usesUsername: false };
    const player = { steamId: newSteamId(), displayName: name };
    await vote({ steamId: player.steamId });
    t.is(await easyVoteStatus(site, credentials, player), "claim", `3.2.x ${name}: check 1`);
    t.deepEqual(await easyVoteClaim(site, credentials, player), { kind: "rewarded" }, `3.2.x ${name}: claim 1`);
    t.deepEqual(await easyVoteClaim(site, credentials, player), { kind: "told_already_voted" }, `3.2.x ${name}: claim 2`);

    const old = { steamId: newSteamId(), displayName: name };
    await vote({ steamId: old.steamId });
    const url304 = (template: string) => easyVote304Url(withHost(template, base), name, false, credentials, old);
    t.is(await easyVote304Status(url304(preset.status)), "told_to_claim", `3.0.4 ${name}: check 1`);
    t.is(await easyVote304Claim(url304(preset.claim)), "rewarded", `3.0.4 ${name}: claim 1`);
    t.is(await easyVote304Claim(url304(preset.claim)), "told_already_voted", `3.0.4 ${name}: claim 2`);
  }

  // EasyVoteExtended 3.0.4's username mode: {1} is the raw display name (System.Uri escapes the space as %20).
  const byName = {
    status: `${base}/api/?object=votes&element=claim&key={0}&username={1}`,
    claim: `${base}/api/?action=post&object=votes&element=claim&key={0}&username={1}`,
  };
  const named = { steamId: newSteamId(), displayName: "Old Timer" };
  await vote({ username: "old timer" });
  const nameUrl = (template: string) => easyVote304Url(template, "HeartsList", true, credentials, named);
  t.is(await easyVote304Status(nameUrl(byName.status)), "told_to_claim", "3.0.4 username mode: check 1");
  t.is(await easyVote304Claim(nameUrl(byName.claim)), "rewarded", "3.0.4 username mode: claim 1");
  t.is(await easyVote304Claim(nameUrl(byName.claim)), "told_already_voted", "3.0.4 username mode: claim 2");

  const steamHex = BigInt(newSteamId()).toString(16);
  const fivem = { apiUrl: withHost(PLUGIN_PRESETS.fivemApiUrl, base), serverKey: claimKey, identifier: "steam" as const };
  const fivemPlayer = { steam: `steam:${steamHex}`, license: "license:4f2a9c" };
  await vote({ steamId: BigInt(`0x${steamHex}`).toString(10) });
  t.is(await fivemCheckVote(fivem, fivemPlayer), "rewarded", "FiveM: check 1 -> claim 1");
  t.is(await fivemCheckVote(fivem, fivemPlayer), "vote_already_claimed", "FiveM: check 2");

  const vrc: VrcFile = {
    name: "minecraftpocket-servers.com",
    website: base,
    check: withHost(PLUGIN_PRESETS.voteReward.check, base).replace("key=K", `key=${claimKey}`),
    claim: withHost(PLUGIN_PRESETS.voteReward.claim, base).replace("key=K", `key=${claimKey}`),
  };
  await vote({ username: "Pocket Miner" });
  t.deepEqual(await voteRewardQuery(vrc, "Pocket Miner"), { kind: "rewarded" }, "VoteReward: check voted -> claim claimed");
  t.deepEqual(await voteRewardQuery(vrc, "Pocket Miner"), { kind: "nothing", voted: true, claimed: true }, "VoteReward: check after");

  const rocket = {
    apiKey: claimKey,
    checkHasVoted: withHost(PLUGIN_PRESETS.rocketMod.checkHasVoted, base),
    reportSuccess: withHost(PLUGIN_PRESETS.rocketMod.reportSuccess, base),
  };
  const unturned = newSteamId();
  await vote({ steamId: unturned });
  t.deepEqual(await rocketModReward(rocket, unturned), { kind: "rewarded", report: { status: 200, body: "1" } }, "RocketMod: check 1, report 1");
  t.deepEqual(await rocketModReward(rocket, unturned), { kind: "told_already_voted" }, "RocketMod: check 2");
  assertDigit(t, await pluginGet(rocket.reportSuccess.replace("{0}", claimKey).replace("{1}", unturned)), "2");
});

test("the values the claim card and `rcb claims setup` show work as pasted, in each plugin: check 1, claim 1, claim 2", async (t) => {
  const { serverId, claimKey, vote } = await serverWithKey(t);
  const setups = Object.fromEntries(pluginSetups({ base: t.context.gateway.url, serverId, claimKey }).map((s) => [s.id, s.values.map((v) => v.value)]));
  const unxml = (text: string) =>
    text
      .replace(/&lt;/g, "<")
      .replace(/&gt;/g, ">")
      .replace(/&quot;/g, '"')
      .replace(/&amp;/g, "&");

  for (const id of ["easyvote", "easyvote-username"] as const) {
    const [statusUrl, claimUrl, usesUsername, credentials] = setups[id] as string[];
    const site: EasyVoteSite = { statusUrl: statusUrl!, claimUrl: claimUrl!, usesUsername: usesUsername === "true" };
    for (const version of ["3.2.x", "3.0.4"]) {
      const player = { steamId: newSteamId(), displayName: `Card ${version} ${seq}` };
      await vote(site.usesUsername ? { username: player.displayName } : { steamId: player.steamId });
      if (version === "3.2.x") {
        t.is(await easyVoteStatus(site, credentials!, player), "claim", `${id} ${version}: check 1`);
        t.deepEqual(await easyVoteClaim(site, credentials!, player), { kind: "rewarded" }, `${id} ${version}: claim 1`);
        t.deepEqual(await easyVoteClaim(site, credentials!, player), { kind: "told_already_voted" }, `${id} ${version}: claim 2`);
      } else {
        const url = (template: string) => easyVote304Url(template, "HeartsList", site.usesUsername, credentials!, player);
        t.is(await easyVote304Status(url(site.statusUrl)), "told_to_claim", `${id} ${version}: check 1`);
        t.is(await easyVote304Claim(url(site.claimUrl)), "rewarded", `${id} ${version}: claim 1`);
        t.is(await easyVote304Claim(url(site.claimUrl)), "told_already_voted", `${id} ${version}: claim 2`);
      }
    }
  }

  const [configLua, endpoints] = setups.fivem as string[];
  const fivem = {
    apiUrl: /\["status"\] = "([^"?]+)\?/.exec(endpoints!)![1]!,
    serverKey: /Config\.trackyServerKey = "([^"]+)"/.exec(configLua!)![1]!,
    identifier: /Config\.identifier = "(steam|discord)"/.exec(configLua!)![1] as "steam",
  };
  const steamHex = BigInt(newSteamId()).toString(16);
  await vote({ steamId: BigInt(`0x${steamHex}`).toString(10) });
  t.is(await fivemCheckVote(fivem, { steam: `steam:${steamHex}`, license: "license:1" }), "rewarded", "FiveM: check 1 -> claim 1");
  t.is(await fivemCheckVote(fivem, { steam: `steam:${steamHex}`, license: "license:1" }), "vote_already_claimed", "FiveM: check 2");

  const vrc = JSON.parse((setups.votereward as string[])[0]!) as VrcFile;
  await vote({ username: "Card Miner" });
  t.deepEqual(await voteRewardQuery(vrc, "Card Miner"), { kind: "rewarded" }, "VoteReward: check voted -> claim claimed");
  t.deepEqual(await voteRewardQuery(vrc, "Card Miner"), { kind: "nothing", voted: true, claimed: true }, "VoteReward: after");

  const [service, definition] = setups.rocketmod as string[];
  const rocket = {
    apiKey: unxml(/APIKey="([^"]*)"/.exec(service!)![1]!),
    checkHasVoted: unxml(/<CheckHasVoted>(.*)<\/CheckHasVoted>/.exec(definition!)![1]!),
    reportSuccess: unxml(/<ReportSuccess>(.*)<\/ReportSuccess>/.exec(definition!)![1]!),
  };
  const unturned = newSteamId();
  await vote({ steamId: unturned });
  t.deepEqual(await rocketModReward(rocket, unturned), { kind: "rewarded", report: { status: 200, body: "1" } }, "RocketMod: check 1, report 1");
  t.deepEqual(await rocketModReward(rocket, unturned), { kind: "told_already_voted" }, "RocketMod: check 2");
});

test("every id kind on both digit families: check 1 -> claim 1 -> check 2 -> claim 2, exact bytes, GET with no User-Agent", async (t) => {
  const { claimKey, vote } = await serverWithKey(t);
  const base = `${t.context.gateway.url}/api/votes`;
  const ids: Array<[param: string, value: string, cast: Parameters<typeof vote>[0]]> = [
    ["steamid", "76561198000777001", { steamId: "76561198000777001" }],
    ["username", "mixed+Case+Name", { username: "Mixed Case name" }],
    ["discordid", "412345678901234567", { discordId: "412345678901234567" }],
    ["uuid", "069A79F444E94726A5BEFCA90E38AAF5", { minecraftUuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5" }],
    ["accountid", "acct-778", { accountId: "acct-778" }],
  ];
  for (const [param, value, cast] of ids) {
    await vote(cast);
    const id = `key=${claimKey}&${param}=${value}`;
    const check = await pluginGet(`${base}?action=status&${id}`);
    t.notRegex(check.request, /user-agent/i);
    t.regex(check.request, /^GET .* HTTP\/1\.1\r\nHost: [^\r]+\r\nConnection: close\r\n\r\n$/);
    assertDigit(t, check, "1");
    assertDigit(t, await pluginGet(`${base}?action=claim&${id}`), "1");
    assertDigit(t, await pluginGet(`${base}?object=votes&element=claim&${id}`), "2");
    assertDigit(t, await pluginGet(`${base}?action=post&object=votes&element=claim&${id}`), "2");
    assertDigit(t, await pluginGet(`${base}?action=claim&${id}`), "2");
  }
});

test("a wrong key answers exactly what an unknown player gets (0, or the not-found JSON), on check and claim", async (t) => {
  const { claimKey, vote } = await serverWithKey(t);
  const steamId = newSteamId();
  await vote({ steamId });
  const base = `${t.context.gateway.url}/api/votes`;
  const wrong = `vck_${randomBytes(16).toString("hex")}`;
  const unknownPlayer = await pluginGet(`${base}?action=status&key=${claimKey}&steamid=${newSteamId()}`);
  for (const url of [
    `${base}?action=status&key=${wrong}&steamid=${steamId}`,
    `${base}?action=claim&key=${wrong}&steamid=${steamId}`,
    `${base}?object=votes&element=claim&key=${claimKey.slice(0, -1)}&steamid=${steamId}`,
  ]) {
    const res = await pluginGet(url);
    assertDigit(t, res, "0");
    t.deepEqual([res.status, res.headers["content-type"], res.body], [unknownPlayer.status, unknownPlayer.headers["content-type"], unknownPlayer.body]);
  }
  const json = await pluginGet(`${base}/json?action=claim&key=${wrong}&steamid=${steamId}`);
  t.deepEqual(JSON.parse(json.body), { voted: false, claimed: false, status: "not_found", heart_id: null, voted_at: null, claimed_at: null, expires_at: null });
  assertDigit(t, await pluginGet(`${base}?action=status&key=${claimKey}&steamid=${steamId}`), "1");
});

test("another server's key reads and claims nothing of this server's votes", async (t) => {
  const mine = await serverWithKey(t);
  const other = await serverWithKey(t);
  const steamId = newSteamId();
  await mine.vote({ steamId });
  const base = `${t.context.gateway.url}/api/votes`;
  assertDigit(t, await pluginGet(`${base}?action=claim&key=${other.claimKey}&steamid=${steamId}`), "0");
  assertDigit(t, await pluginGet(`${base}?action=claim&key=${mine.claimKey}&steamid=${steamId}`), "1");
});

test("two claims at once pay once: one 1 and one 2", async (t) => {
  const { claimKey, vote } = await serverWithKey(t);
  const steamId = newSteamId();
  await vote({ steamId });
  const url = `${t.context.gateway.url}/api/votes?action=claim&key=${claimKey}&steamid=${steamId}`;
  const answers = await Promise.all([pluginGet(url), pluginGet(url), pluginGet(url)]);
  t.deepEqual(answers.map((a) => a.body).sort(), ["1", "2", "2"]);
});

test("the wrong-key limiter: a guessing source gets 0 with 429 and Retry-After, while a key seen working still answers from the same source", async (t) => {
  const { stack } = t.context;
  const limited = await stack.startGateway({ serviceToken: "gateway", overrides: () => ({ claimKeyGuesses: { perSource: 3 } }) });
  const { claimKey, vote } = await serverWithKey(t);
  const fresh = await serverWithKey(t);
  const steamId = newSteamId();
  await vote({ steamId });
  const base = `${limited.url}/api/votes`;
  assertDigit(t, await pluginGet(`${base}?action=status&key=${claimKey}&steamid=${steamId}`), "1");

  for (let i = 0; i < 3; i++) assertDigit(t, await pluginGet(`${base}?action=status&key=vck_guess${i}&steamid=${steamId}`), "0");
  const refused = await pluginGet(`${base}?action=status&key=vck_guess9&steamid=${steamId}`);
  t.is(refused.status, 429);
  t.is(refused.body, "0");
  t.is(refused.headers["content-type"], "text/plain");
  t.regex(refused.headers["retry-after"] ?? "", /^[1-9]\d*$/);
  t.deepEqual(validateTextAgainstOpenApi("/api/votes", "get", 429, refused.body).errors, []);
  const refusedJson = await pluginGet(`${base}/json?action=status&key=vck_guess10&steamid=${steamId}`);
  t.is(refusedJson.status, 429);
  t.deepEqual(validateAgainstOpenApi("/api/votes/json", "get", 429, JSON.parse(refusedJson.body)).errors, []);

  assertDigit(t, await pluginGet(`${base}?action=claim&key=${claimKey}&steamid=${steamId}`), "1");
  assertDigit(t, await pluginGet(`${base}?action=status&key=${claimKey}&steamid=${steamId}`), "2");
  // A right key the gateway has never seen answer waits like a guess (documented: docs/limits.md).
  t.is((await pluginGet(`${base}?action=status&key=${fresh.claimKey}&steamid=${steamId}`)).status, 429);
  // Another gateway process keeps its own counts.
  assertDigit(t, await pluginGet(`${t.context.gateway.url}/api/votes?action=status&key=${fresh.claimKey}&steamid=${steamId}`), "0");
});

test("wrong keys from 256 addresses never get a right key refused: a new server's first key and a rotated key, never seen working, answer their digit from a fresh address", async (t) => {
  const { stack } = t.context;
  // The production limits, behind a proxy: each request's source is its X-Forwarded-For.
  const gateway = await stack.startGateway({ serviceToken: "gateway", overrides: () => ({ trustProxy: true }) });
  const get = async (query: string, source: string) => {
    const res = await fetch(`${gateway.url}/api/votes?${query}`, { headers: { "x-forwarded-for": source } });
    return { status: res.status, body: await res.text() };
  };
  const rotated = await serverWithKey(t);
  const steamId = newSteamId();
  await rotated.vote({ steamId });
  t.deepEqual(
    await get(`action=status&key=${rotated.claimKey}&steamid=${steamId}`, "198.51.100.20"),
    { status: 200, body: "1" },
    "seen working before the flood",
  );

  // 16 wrong keys from each of 256 addresses (within each address's own budget), 64 in flight.
  const guesses = Array.from(
    { length: 256 * 16 },
    (_, n) => () => get(`action=status&key=vck_${randomBytes(32).toString("base64url")}&steamid=${steamId}`, `203.0.113.${n % 256}`),
  );
  const answered = new Map<string, number>();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      for (let guess = guesses.pop(); guess !== undefined; guess = guesses.pop()) {
        const res = await guess();
        answered.set(`${res.status} ${res.body}`, (answered.get(`${res.status} ${res.body}`) ?? 0) + 1);
      }
    }),
  );
  t.log(`wrong keys answered: ${JSON.stringify([...answered])}`);
  t.false(
    [...answered.keys()].some((answer) => answer.endsWith(" 1")),
    "no guess found a vote",
  );

  const fresh = await serverWithKey(t);
  await fresh.vote({ steamId });
  t.deepEqual(await get(`action=status&key=${fresh.claimKey}&steamid=${steamId}`, "198.51.100.21"), { status: 200, body: "1" }, "a new server's first key");
  const { claimKey: rotatedKey } = await stack.clients.admin.rotateClaimKey({ serverId: rotated.serverId });
  t.deepEqual(await get(`action=status&key=${rotatedKey}&steamid=${steamId}`, "198.51.100.22"), { status: 200, body: "1" }, "a rotated key");
  t.deepEqual(await get(`action=claim&key=${rotatedKey}&steamid=${steamId}`, "198.51.100.22"), { status: 200, body: "1" }, "and it claims");
});

test("the key never reaches a log line or a metric label: the request line logs the path without the query", async (t) => {
  const { claimKey, vote } = await serverWithKey(t);
  const steamId = newSteamId();
  await vote({ steamId });
  const base = `${t.context.gateway.url}/api/votes`;
  const wrong = `vck_${randomBytes(16).toString("hex")}`;
  await pluginGet(`${base}?action=status&key=${claimKey}&steamid=${steamId}`);
  await pluginGet(`${base}?action=claim&key=${claimKey}&steamid=${steamId}`);
  await pluginGet(`${base}?action=claim&key=${wrong}&steamid=${steamId}`);
  await pluginGet(`${base}/json?action=claim&key=${claimKey}&steamid=not-a-steam-id`);
  const lines = t.context.gatewayLog.lines.filter((l) => String(l.route).startsWith("/api/votes"));
  t.true(lines.length >= 4);
  t.true(
    lines.every((l) => l.path === l.route),
    "the logged path is the route, no query",
  );
  t.true(
    lines.some((l) => l.outcome === "wrong_key"),
    "a wrong key is logged as such",
  );
  for (const secret of [claimKey, wrong]) {
    t.false(t.context.gatewayLog.raw.join("\n").includes(secret), "not in the gateway's log");
    t.false(t.context.serviceLog.raw.join("\n").includes(secret), "not in the referral service's log");
    t.false((await t.context.gateway.metrics.registry.metrics()).includes(secret), "not in a metric label");
  }
});

test("a gateway whose service token lacks the claims scope (changed after its start) answers 503 with Retry-After and the family's body, never 500; logged with its cause, the key stays out of the line", async (t) => {
  const { stack } = t.context;
  const { token } = await stack.clients.access.createServiceToken({ name: `no-claims-${++seq}`, scopes: ["ingest", "pull"] });
  const log = captureLog("debug");
  const broken = await stack.startGateway({ log: log.log, overrides: () => createReferralServiceClients(stack.rpcUrl, token) });
  const key = `vck_${randomBytes(32).toString("base64url")}`;
  const digit = await pluginGet(`${broken.url}/api/votes?action=claim&key=${key}&steamid=76561198000000001`);
  t.is(digit.status, 503);
  t.is(digit.body, "0");
  t.is(digit.headers["content-type"], "text/plain");
  t.true(Number(digit.headers["retry-after"]) >= 1);
  t.deepEqual(validateTextAgainstOpenApi("/api/votes", "get", 503, digit.body).errors, []);
  const json = await pluginGet(`${broken.url}/api/votes/json?action=status&key=${key}&steamid=76561198000000001`);
  t.is(json.status, 503);
  t.is(json.headers["content-type"], "application/json");
  t.true(Number(json.headers["retry-after"]) >= 1);
  t.deepEqual(validateAgainstOpenApi("/api/votes/json", "get", 503, JSON.parse(json.body)).errors, []);
  const refused = log.lines.filter((l) => l.outcome === "service_unavailable");
  t.is(refused.length, 2);
  t.true(refused.every((l) => l.err !== undefined && l.path !== undefined && l.status === 503));
  t.false(log.lines.some((l) => l.status === 500));
  t.false(log.raw.join("\n").includes(key));
});
