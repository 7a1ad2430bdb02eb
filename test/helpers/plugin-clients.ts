/**
 * Plugin-faithful clients of the check/claim API (gateway/handle-vote-claim.ts): each function makes
 * exactly the HTTP request a published reward plugin makes - its method, its URL as built from the
 * plugin's config, its id encoding, its headers - over a raw TCP socket, and reads the answer exactly
 * as that plugin's parser does. The sources read (issue 19 research, docs/votifier-and-pull.md
 * "Check/claim API for reward plugins"):
 *
 * 1. EasyVoteExtended 3.2.1 (uMod/Oxide, Rust; github.com/dfxphoenix/EasyVoteExtended, EasyVoteExtended.cs).
 *    - Config "Voting Sites API Information" -> per site "API Vote status (GET URL)" and "API Claim Reward
 *      (GET URL)", C# format strings: {0} = the key, {1} = the player, {2} = the server id; per server
 *      "Server Voting IDs and Keys" -> "<site>": "ID:KEY" (split at the first ':'; "ID"/"KEY" placeholders skip it).
 *    - FormatApiUrl: key and server id through Uri.EscapeDataString; the player is the SteamID64
 *      (UserIDString, decimal) or, when "Site Uses Username Instead of Player Steam ID?" is true,
 *      Uri.EscapeDataString(displayName) (RFC 3986: a space is %20; unreserved A-Z a-z 0-9 - . _ ~ stay).
 *    - webrequest.Enqueue(url, null, callback, this, RequestMethod.GET, null, 5000): GET, no body, no
 *      headers of its own (Oxide's web request library adds its host defaults), 5 s timeout.
 *    - Status: code != 200 -> logged error, nothing else; else response.Trim() compared exactly:
 *      "1" -> the claim request; "0" -> "you have not voted"; "2" -> "already voted"; anything else -> silence.
 *    - Claim: code != 200 -> error; response.Trim() == "1" -> reward; "2" -> "already voted"; else "not voted yet".
 *    - Its default rust-servers.net entry checks with `?object=votes&element=claim&key={0}&steamid={1}` and claims
 *      with `?action=custom&object=plugin&element=reward&key={0}&steamid={1}`; the others (rustservers.gg,
 *      bestservers, trackyserver, rustserverlist) use `?action=status|claim&key={0}&steamid={1}` (+ `&server={2}`).
 * 2. The FiveM vote script for trackyserver (github.com/Murgator/FiveM-vote-script, server/server.lua, config.lua).
 *    - config.lua: Config.trackyServerKey, Config.identifier = "steam" | "discord". The URLs are the `endpoints`
 *      table at the top of server/server.lua: `<api>/vote/?action=status&key=%s&<identifier>id=%s&customid=%s`
 *      and the same with `action=claim`; string.format, nothing encoded.
 *    - The steam id is the player's `steam:<hex>` identifier converted with tonumber(hex, 16) (SteamID64 decimal);
 *      discord is the `discord:<id>` identifier's digits; customid is the `license:` hash (hex).
 *    - PerformHttpRequest(url, cb, "GET", "", {}): GET, empty body, no headers of its own.
 *    - Parse: statusCode ~= 200 -> printed error; then string.find(text, "0") FIRST (any "0" anywhere means
 *      "not voted"), else "1", else "2". So the answer must be the bare digit: "2026-..." would read as "0".
 *      Status "1" -> the claim request; claim "1" -> reward, "2" -> "already claimed", "0" -> "not voted".
 * 3. VoteReward for PocketMine-MP (github.com/LukeDarling/VoteReward, src/LDX/VoteReward/RequestThread.php, VRC.md).
 *    - A `.vrc` file per list: {"name","website","check","claim"}; the URLs carry the key and `{USERNAME}`. The
 *      plugin's own migration writes minecraftpocket-servers.com's `/api-vrc/?object=votes&element=claim&key=K&username={USERNAME}`
 *      and `/api-vrc/?action=post&object=votes&element=claim&key=K&username={USERNAME}`.
 *    - `{USERNAME}` = PHP urlencode(strtolower(player name)): a space is `+`, everything but A-Z a-z 0-9 - _ . is %XX.
 *    - file_get_contents(url): GET, `Host` and `Connection: close`, no User-Agent (PHP's `user_agent` ini is empty
 *      by default); a status other than 2xx makes it return false (the plugin's error path).
 *    - Parse: json_decode(..., true) must be an array with `voted` and `claimed` both booleans (is_bool), else error.
 *      Check voted && !claimed -> the claim request; claim answering voted && claimed -> reward.
 */
import net from "node:net";

/** A raw HTTP answer as the socket delivered it. */
export interface RawHttpAnswer {
  status: number;
  headers: Record<string, string>;
  /** The body bytes as text, exactly (no trimming). */
  body: string;
  /** The request bytes that were sent (what a plugin sends, for assertions). */
  request: string;
}

/**
 * GET `url` the way the plugins' HTTP stacks do: HTTP/1.1, `Host` and `Connection: close` only (no
 * User-Agent, no Accept), the path and query sent exactly as given (no re-encoding), read to the close.
 */
export function pluginGet(url: string): Promise<RawHttpAnswer> {
  const at = url.indexOf("/", url.indexOf("//") + 2);
  const origin = new URL(url.slice(0, at === -1 ? undefined : at));
  const target = at === -1 ? "/" : url.slice(at);
  const request = `GET ${target} HTTP/1.1\r\nHost: ${origin.host}\r\nConnection: close\r\n\r\n`;
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: origin.hostname, port: Number(origin.port || 80) });
    const chunks: Buffer[] = [];
    socket.setTimeout(30_000, () => socket.destroy(new Error(`no answer from ${origin.host} within 30 s`)));
    socket.on("connect", () => socket.write(request));
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("end", () => {
      try {
        resolve({ ...parseResponse(Buffer.concat(chunks)), request });
      } catch (error) {
        reject(error as Error);
      }
    });
  });
}

function parseResponse(raw: Buffer): Omit<RawHttpAnswer, "request"> {
  const split = raw.indexOf("\r\n\r\n");
  if (split === -1) throw new Error(`incomplete HTTP answer: ${JSON.stringify(raw.toString("latin1"))}`);
  const [statusLine, ...lines] = raw.subarray(0, split).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1]);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = raw.subarray(split + 4);
  if (headers["transfer-encoding"]?.toLowerCase() === "chunked") body = unchunk(body);
  return { status, headers, body: body.toString("utf8") };
}

function unchunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = body.indexOf("\r\n", at);
    const size = Number.parseInt(body.subarray(at, lineEnd).toString("latin1"), 16);
    if (!size) return Buffer.concat(parts);
    parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

/** .NET's Uri.EscapeDataString (RFC 3986): everything but A-Z a-z 0-9 - . _ ~ as upper-case %XX of UTF-8. */
export function escapeDataString(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** PHP's urlencode: a space is `+`; everything but A-Z a-z 0-9 - _ . as upper-case %XX of UTF-8. */
export function phpUrlencode(value: string): string {
  return encodeURIComponent(value)
    .replace(/[!'()*~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/%20/g, "+");
}

/** C#'s string.Format with positional `{n}` holes. */
function formatCs(template: string, ...args: string[]): string {
  return template.replace(/\{(\d+)\}/g, (_, n: string) => args[Number(n)] ?? "");
}

// ---------------------------------------------------------------------------------------------------
// EasyVoteExtended (Rust, uMod/Oxide)

/** One "Voting Sites API Information" entry of EasyVoteExtended's config (the owner pastes our URLs here). */
export interface EasyVoteSite {
  statusUrl: string;
  claimUrl: string;
  /** "Site Uses Username Instead of Player Steam ID?" */
  usesUsername: boolean;
}

/** The player as EasyVoteExtended sees it. */
export interface RustPlayer {
  /** UserIDString: SteamID64, decimal. */
  steamId: string;
  displayName: string;
}

/** What EasyVoteExtended did after asking one site about one player. */
export type EasyVoteOutcome =
  | { kind: "rewarded" }
  | { kind: "told_not_voted" }
  | { kind: "told_already_voted" }
  | { kind: "silent" }
  | { kind: "error"; code: number; response: string };

/** The URL of one EasyVoteExtended request (FormatApiUrl). `credentials` is the "ID:KEY" value of the server's site entry. */
export function easyVoteUrl(template: string, site: EasyVoteSite, credentials: string, player: RustPlayer): string {
  const colon = credentials.indexOf(":");
  const [serverId, serverKey] = [credentials.slice(0, colon).trim(), credentials.slice(colon + 1).trim()];
  const identifier = site.usesUsername ? escapeDataString(player.displayName) : player.steamId;
  return formatCs(template, escapeDataString(serverKey), identifier, escapeDataString(serverId));
}

/** EasyVoteExtended's status request alone, parsed as HandleStatusWebRequestCallback does (without following a "1"). */
export async function easyVoteStatus(site: EasyVoteSite, credentials: string, player: RustPlayer): Promise<"claim" | EasyVoteOutcome> {
  const res = await pluginGet(easyVoteUrl(site.statusUrl, site, credentials, player));
  if (res.status !== 200) return { kind: "error", code: res.status, response: res.body };
  const response = res.body.trim();
  if (response === "1") return "claim";
  if (response === "0") return { kind: "told_not_voted" };
  if (response === "2") return { kind: "told_already_voted" };
  return { kind: "silent" };
}

/** EasyVoteExtended's claim request alone, parsed as HandleClaimWebRequestCallback does. */
export async function easyVoteClaim(site: EasyVoteSite, credentials: string, player: RustPlayer): Promise<EasyVoteOutcome> {
  const res = await pluginGet(easyVoteUrl(site.claimUrl, site, credentials, player));
  if (res.status !== 200) return { kind: "error", code: res.status, response: res.body };
  const response = res.body.trim();
  if (response === "1") return { kind: "rewarded" };
  if (response === "2") return { kind: "told_already_voted" };
  return { kind: "told_not_voted" };
}

/** One CheckVotingStatus round for one site: status, then the claim when the status said "1". */
export async function easyVoteCheck(site: EasyVoteSite, credentials: string, player: RustPlayer): Promise<EasyVoteOutcome> {
  const status = await easyVoteStatus(site, credentials, player);
  return status === "claim" ? easyVoteClaim(site, credentials, player) : status;
}

// ---------------------------------------------------------------------------------------------------
// FiveM vote script (trackyserver family)

/** The FiveM script's config and its endpoints table, pointed at a list. */
export interface FiveMConfig {
  /** The `endpoints` base, e.g. `https://list.example/api/votes` (upstream: `https://api.trackyserver.com/vote/`). */
  apiUrl: string;
  /** Config.trackyServerKey */
  serverKey: string;
  /** Config.identifier */
  identifier: "steam" | "discord";
}

/** The player's FiveM identifiers (GetPlayerIdentifiers). */
export interface FiveMPlayer {
  /** `steam:<hex>` */
  steam?: string;
  /** `discord:<digits>` */
  discord?: string;
  /** `license:<hash>` */
  license: string;
}

/** What the script did on /checkvote. */
export type FiveMOutcome =
  | "rewarded"
  | "vote_not_found"
  | "vote_already_claimed"
  | "steam_not_found"
  | { error: "status" | "claim"; statusCode: number }
  | "no_match";

/** The status and claim URLs of the script (string.format of its endpoints, nothing encoded). */
export function fivemUrls(config: FiveMConfig, player: FiveMPlayer): { status: string; claim: string } | undefined {
  let id: string | undefined;
  if (config.identifier === "steam" && player.steam?.startsWith("steam:")) id = BigInt(`0x${player.steam.slice(6)}`).toString(10);
  if (config.identifier === "discord" && player.discord?.startsWith("discord:")) id = player.discord.replace("discord:", "");
  if (id === undefined) return undefined;
  const licence = player.license.replace("license:", "");
  const url = (action: string) => `${config.apiUrl}?action=${action}&key=${config.serverKey}&${config.identifier}id=${id}&customid=${licence}`;
  return { status: url("status"), claim: url("claim") };
}

/** Lua's string.find(text, digit) with a plain one-character pattern. */
const luaFind = (text: string, digit: string) => text.includes(digit);

/** The script's RegisterCommand("checkvote") handler: status, then claim on "1", parsed with string.find in its order. */
export async function fivemCheckVote(config: FiveMConfig, player: FiveMPlayer): Promise<FiveMOutcome> {
  const urls = fivemUrls(config, player);
  if (urls === undefined) return "steam_not_found";
  const status = await pluginGet(urls.status);
  if (status.status !== 200) return { error: "status", statusCode: status.status };
  if (luaFind(status.body, "0")) return "vote_not_found";
  if (luaFind(status.body, "1")) return fivemClaim(urls.claim);
  if (luaFind(status.body, "2")) return "vote_already_claimed";
  return "no_match";
}

/** The script's claim request alone (the inner PerformHttpRequest). */
export async function fivemClaim(claimUrl: string): Promise<FiveMOutcome> {
  const claim = await pluginGet(claimUrl);
  if (claim.status !== 200) return { error: "claim", statusCode: claim.status };
  if (luaFind(claim.body, "0")) return "vote_not_found";
  if (luaFind(claim.body, "1")) return "rewarded";
  if (luaFind(claim.body, "2")) return "vote_already_claimed";
  return "no_match";
}

// ---------------------------------------------------------------------------------------------------
// VoteReward (PocketMine-MP)

/** A `.vrc` file's content (VRC.md). */
export interface VrcFile {
  name: string;
  website: string;
  check: string;
  claim: string;
}

/** What RequestThread::onRun concluded for one list. */
export type VoteRewardOutcome = { kind: "rewarded" } | { kind: "nothing"; voted: boolean; claimed: boolean } | { kind: "error"; url: string };

/** file_get_contents + json_decode + the is_bool checks; undefined is the plugin's error path. */
async function fetchVrc(url: string): Promise<{ voted: boolean; claimed: boolean } | undefined> {
  const res = await pluginGet(url);
  if (res.status < 200 || res.status > 299) return undefined;
  let decoded: unknown;
  try {
    decoded = JSON.parse(res.body);
  } catch {
    // Failure policy: json_decode returns null on invalid JSON; the plugin takes its error path.
    return undefined;
  }
  if (typeof decoded !== "object" || decoded === null) return undefined;
  const { voted, claimed } = decoded as Record<string, unknown>;
  if (typeof voted !== "boolean" || typeof claimed !== "boolean") return undefined;
  return { voted, claimed };
}

/** RequestThread::onRun for one list and one player: check, then claim when voted and not claimed. */
export async function voteRewardQuery(vrc: VrcFile, playerName: string): Promise<VoteRewardOutcome> {
  const fill = (template: string) => template.replace("{USERNAME}", phpUrlencode(playerName.toLowerCase()));
  const check = await fetchVrc(fill(vrc.check));
  if (check === undefined) return { kind: "error", url: fill(vrc.check) };
  if (!(check.voted && !check.claimed)) return { kind: "nothing", ...check };
  const claim = await fetchVrc(fill(vrc.claim));
  if (claim === undefined) return { kind: "error", url: fill(vrc.claim) };
  return claim.voted && claim.claimed ? { kind: "rewarded" } : { kind: "nothing", ...claim };
}
