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
 *    EasyVoteExtended 3.2.9 (same repository, the commit "Version 3.2.9") keeps these URLs and parsers and adds a
 *    persisted claim transaction per (player, server, site), `PendingClaimTransaction` (createEasyVoteExtended329):
 *    - status "1" -> EnqueueClaimRequest: a transaction (Attempts 0, State Created, HadAmbiguousFailure false), its
 *      claim queued (QueueVoteRequest, one request every 0.2 s); each send counts an attempt (State Sent), 15 s timeout.
 *    - claim answer: code != 200 (any status, a refused connection, a timeout) -> State Uncertain, HadAmbiguousFailure
 *      true, ScheduleClaimRetry; "1" -> Confirm (pay); "2" -> Confirm when HadAmbiguousFailure, else "already voted"
 *      and the transaction dropped; "0" -> dropped, "not voted"; anything else -> Uncertain and ambiguous, retried.
 *    - ScheduleClaimRetry: after 10 s, 10 s, 20 s, 30 s, then 300 s; at MaximumClaimAttempts = 6 the transaction goes to
 *      ManualReview (no more claims; the next CheckVotingStatus releases it and checks the status again).
 *    - CheckVotingStatus while a transaction exists sends no status request: it re-queues the claim (or finishes a
 *      confirmed one). A status "2" while a transaction with HadAmbiguousFailure exists Confirms it (pays); a status
 *      "0" drops an existing transaction.
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
 * 4. RocketMod Votifier for Unturned (fr34kyn01535's plugin; its RocketMod 4 source as kept at github.com/Tortellio/Votifier,
 *    Votifier.cs, VotifierWebclient.cs, Config.cs, CommandReward.cs).
 *    - Config: per service an APIKey; a ServiceDefinition with CheckHasVoted and ReportSuccess, C# format strings
 *      {0} = the key, {1} = the player. unturned-servers.net's: `/api/?object=votes&element=claim&key={0}&steamid={1}` and
 *      `/api/?action=post&object=votes&element=claim&key={0}&steamid={1}`. Nothing is escaped; the player is the SteamID64.
 *    - /reward (alias /vote): WebClient.DownloadStringAsync(check URL) with a 5 s timeout (VotifierWebclient). A non-2xx
 *      status or a network error makes e.Result throw in the completion handler: nothing happens, the player types
 *      /reward again. The answer is compared exactly (a switch, no trim): "0" -> "not yet voted"; "2" -> "already voted";
 *      "1" -> the reward is given AT ONCE (OnPlayerVoted), then ReportSuccess is requested fire-and-forget: its answer,
 *      or its failure, is never read.
 *
 * Retrying after a failed request: EasyVoteExtended 3.2.9 retries its claim transaction (above); every other plugin
 * keeps nothing, so a failed request is followed by the player's next command, which runs the whole check again.
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
export function pluginGet(url: string, opts: { timeoutMs?: number } = {}): Promise<RawHttpAnswer> {
  const at = url.indexOf("/", url.indexOf("//") + 2);
  const origin = new URL(url.slice(0, at === -1 ? undefined : at));
  const target = at === -1 ? "/" : url.slice(at);
  const request = `GET ${target} HTTP/1.1\r\nHost: ${origin.host}\r\nConnection: close\r\n\r\n`;
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: origin.hostname, port: Number(origin.port || 80) });
    const chunks: Buffer[] = [];
    const timeoutMs = opts.timeoutMs ?? 30_000;
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no answer from ${origin.host} within ${timeoutMs} ms`)));
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

/**
 * A plugin's request as its HTTP stack reports it back: a refused connection, a cut one or a timeout is status 0 with
 * the error as the body (Oxide's web requests and FiveM's PerformHttpRequest call back with code 0; PHP's
 * file_get_contents returns false; .NET's WebClient raises), so every client reads "no 200" the way its plugin does.
 */
export async function pluginRequest(url: string, timeoutMs?: number): Promise<RawHttpAnswer> {
  try {
    return await pluginGet(url, timeoutMs === undefined ? {} : { timeoutMs });
  } catch (error) {
    // Failure policy: the plugins see a network failure as a failed request (code 0), never as an answer.
    return { status: 0, headers: {}, body: (error as Error).message, request: "" };
  }
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

/** Oxide's web request timeout as EasyVoteExtended 3.2.1 passes it. */
const EASY_VOTE_321_TIMEOUT_MS = 5_000;

/** What a test may do between a plugin's check and its claim (where the fault is injected: a plugin queues its claim). */
export interface PluginHooks {
  beforeClaim?: () => Promise<void>;
}

/** EasyVoteExtended's status request alone, parsed as HandleStatusWebRequestCallback does (without following a "1"). */
export async function easyVoteStatus(site: EasyVoteSite, credentials: string, player: RustPlayer): Promise<"claim" | EasyVoteOutcome> {
  const res = await pluginRequest(easyVoteUrl(site.statusUrl, site, credentials, player), EASY_VOTE_321_TIMEOUT_MS);
  if (res.status !== 200) return { kind: "error", code: res.status, response: res.body };
  const response = res.body.trim();
  if (response === "1") return "claim";
  if (response === "0") return { kind: "told_not_voted" };
  if (response === "2") return { kind: "told_already_voted" };
  return { kind: "silent" };
}

/** EasyVoteExtended's claim request alone, parsed as HandleClaimWebRequestCallback does (3.2.1: no transaction kept). */
export async function easyVoteClaim(site: EasyVoteSite, credentials: string, player: RustPlayer): Promise<EasyVoteOutcome> {
  const res = await pluginRequest(easyVoteUrl(site.claimUrl, site, credentials, player), EASY_VOTE_321_TIMEOUT_MS);
  if (res.status !== 200) return { kind: "error", code: res.status, response: res.body };
  const response = res.body.trim();
  if (response === "1") return { kind: "rewarded" };
  if (response === "2") return { kind: "told_already_voted" };
  return { kind: "told_not_voted" };
}

/** One CheckVotingStatus round of 3.2.1 for one site: status, then the claim when the status said "1". */
export async function easyVoteCheck(site: EasyVoteSite, credentials: string, player: RustPlayer, hooks: PluginHooks = {}): Promise<EasyVoteOutcome> {
  const status = await easyVoteStatus(site, credentials, player);
  if (status !== "claim") return status;
  await hooks.beforeClaim?.();
  return easyVoteClaim(site, credentials, player);
}

// ---------------------------------------------------------------------------------------------------
// EasyVoteExtended 3.2.9: the claim transaction

/** EasyVoteExtended 3.2.9's VoteApiRequestTimeout. */
export const EASY_VOTE_329_TIMEOUT_MS = 15_000;
/** EasyVoteExtended 3.2.9's MaximumClaimAttempts. */
export const EASY_VOTE_329_MAX_CLAIM_ATTEMPTS = 6;

/** One PendingClaimTransaction of EasyVoteExtended 3.2.9 (persisted by the plugin; here in memory). */
export interface EasyVoteTransaction {
  transactionId: string;
  player: RustPlayer;
  attempts: number;
  state: "Created" | "Sent" | "Uncertain" | "Confirmed" | "ManualReview";
  hadAmbiguousFailure: boolean;
}

/** One reward EasyVoteExtended 3.2.9 gave (FinalizeConfirmedClaimTransaction), and which answer confirmed it. */
export interface EasyVotePayment {
  steamId: string;
  transactionId: string;
  confirmedBy: "claim 1" | "claim 2 after an ambiguous attempt" | "status 2 after an ambiguous attempt";
}

/** What one CheckVotingStatus (or a retry) of 3.2.9 did for the player. */
export type EasyVote329Step =
  | { kind: "rewarded" }
  | { kind: "told_not_voted" }
  | { kind: "told_already_voted" }
  | { kind: "silent" }
  /** The claim failed or answered something unexpected: the transaction is kept, ambiguous, and retried. */
  | { kind: "claim_retry_scheduled"; code: number; response: string }
  /** The status request failed: logged, nothing kept. */
  | { kind: "status_error"; code: number }
  /** A claim for the transaction is already in flight, or it waits for manual review: nothing sent. */
  | { kind: "nothing_sent"; state: EasyVoteTransaction["state"] | "status in flight" };

/** A claim retry ScheduleClaimRetry set (timer.Once). */
export interface ScheduledClaimRetry {
  delaySeconds: number;
  scheduledAtMs: number;
}

/** EasyVoteExtended 3.2.9's VoteRequestSpacing: its request queue sends one request every 0.2 s. */
export const EASY_VOTE_REQUEST_SPACING_MS = 200;

/**
 * EasyVoteExtended 3.2.9's request queue (StartRequestQueueProcessor): one queued request leaves every `spacingMs`,
 * claims first (QueueVoteRequest with priority), then status requests.
 */
export interface VoteRequestQueue {
  /** Resolves when the request's turn has come. */
  wait(priority: boolean): Promise<void>;
  /** Status requests still waiting (the automatic check skips its cycle while there are any). */
  readonly waitingStatusRequests: number;
  /** Claims waiting for their slot. */
  readonly waitingClaims: number;
}

/** Builds a VoteRequestQueue; its timer runs only while something waits. */
export function createVoteRequestQueue(spacingMs = EASY_VOTE_REQUEST_SPACING_MS): VoteRequestQueue {
  const claims: (() => void)[] = [];
  const statuses: (() => void)[] = [];
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    (claims.shift() ?? statuses.shift())?.();
    if (claims.length + statuses.length === 0) {
      clearInterval(timer);
      timer = undefined;
    }
  };
  return {
    wait(priority) {
      return new Promise<void>((resolve) => {
        (priority ? claims : statuses).push(resolve);
        timer ??= setInterval(tick, spacingMs);
      });
    },
    get waitingStatusRequests() {
      return statuses.length;
    },
    get waitingClaims() {
      return claims.length;
    },
  };
}

/** EasyVoteExtended 3.2.9 on one game server, for one voting site: its transactions, and every reward it gave. */
export interface EasyVoteExtended329 {
  /** The open claim transactions, by the player's SteamID64 (the plugin's key is player:server:site; one server and site here). */
  readonly transactions: ReadonlyMap<string, EasyVoteTransaction>;
  /** Every reward given, in order. */
  readonly payments: readonly EasyVotePayment[];
  /** The players whose claim retry is scheduled (ScheduleClaimRetry): the plugin's delay, and when it was scheduled. */
  readonly scheduledRetries: ReadonlyMap<string, ScheduledClaimRetry>;
  /** CheckVotingStatus for one player (the /claim command, or an automatic check), with the claim it queues. */
  checkVotingStatus(player: RustPlayer): Promise<EasyVote329Step>;
  /**
   * The scheduled retry timers that `isDue` says have fired (default: all, now): each re-queues its claim. The caller
   * owns the clock, so a test fires them when it wants and the campaign compresses the plugin's 10-300 s.
   */
  retryClaims(isDue?: (retry: ScheduledClaimRetry) => boolean): Promise<EasyVote329Step[]>;
  /** Rewards given to one player. */
  paidCount(steamId: string): number;
  /** Requests sent and answers read, for a report. */
  readonly stats: EasyVote329Stats;
}

/** What EasyVoteExtended 3.2.9 sent and read. */
export interface EasyVote329Stats {
  statusRequests: number;
  claimRequests: number;
  /** Claims answered other than 200 (a refused connection and a timeout included). */
  claimFailures: number;
  /** Claims answered 200, by the trimmed body ("other" for anything but 0, 1, 2). */
  claimAnswers: Record<"0" | "1" | "2" | "other", number>;
  /** Transactions that reached MaximumClaimAttempts (ManualReview). */
  manualReviews: number;
}

/**
 * EasyVoteExtended 3.2.9's claim transaction, step for step (HandleStatusWebRequestCallback, EnqueueClaimRequest,
 * QueuePendingClaimTransaction, HandleClaimWebRequestCallback, ScheduleClaimRetry, ConfirmClaimTransaction), with the
 * requests of easyVoteUrl. `beforeClaim` runs where the plugin queues the claim, before each claim is sent; `queue`
 * (optional) spaces the requests as the plugin's queue does.
 */
export function createEasyVoteExtended329(config: {
  site: EasyVoteSite;
  credentials: string;
  timeoutMs?: number;
  beforeClaim?: (steamId: string, attempt: number) => Promise<void>;
  queue?: VoteRequestQueue;
}): EasyVoteExtended329 {
  const transactions = new Map<string, EasyVoteTransaction>();
  const payments: EasyVotePayment[] = [];
  const scheduledRetries = new Map<string, ScheduledClaimRetry>();
  const claimsInFlight = new Set<string>();
  const statusInFlight = new Set<string>();
  const stats: EasyVote329Stats = {
    statusRequests: 0,
    claimRequests: 0,
    claimFailures: 0,
    claimAnswers: { "0": 0, "1": 0, "2": 0, other: 0 },
    manualReviews: 0,
  };
  const toManualReview = (tx: EasyVoteTransaction) => {
    tx.state = "ManualReview";
    stats.manualReviews++;
  };
  const timeoutMs = config.timeoutMs ?? EASY_VOTE_329_TIMEOUT_MS;
  let sequence = 0;
  const request = (template: string, player: RustPlayer) => pluginRequest(easyVoteUrl(template, config.site, config.credentials, player), timeoutMs);
  const isActive = (tx: EasyVoteTransaction) => transactions.get(tx.player.steamId) === tx;

  const remove = (steamId: string) => {
    scheduledRetries.delete(steamId);
    transactions.delete(steamId);
  };
  const confirm = (tx: EasyVoteTransaction, confirmedBy: EasyVotePayment["confirmedBy"]): EasyVote329Step => {
    if (!isActive(tx)) return { kind: "silent" };
    tx.state = "Confirmed";
    // FinalizeConfirmedClaimTransaction: the reward is queued and the transaction removed (persisted in that order).
    payments.push({ steamId: tx.player.steamId, transactionId: tx.transactionId, confirmedBy });
    remove(tx.player.steamId);
    return { kind: "rewarded" };
  };
  const scheduleRetry = (tx: EasyVoteTransaction) => {
    if (!isActive(tx) || tx.state === "ManualReview" || scheduledRetries.has(tx.player.steamId)) return;
    if (tx.attempts >= EASY_VOTE_329_MAX_CLAIM_ATTEMPTS) {
      toManualReview(tx);
      return;
    }
    scheduledRetries.set(tx.player.steamId, { delaySeconds: tx.attempts <= 3 ? Math.max(10, tx.attempts * 10) : 300, scheduledAtMs: Date.now() });
  };
  const ambiguous = (tx: EasyVoteTransaction, code: number, response: string): EasyVote329Step => {
    tx.state = "Uncertain";
    tx.hadAmbiguousFailure = true;
    scheduleRetry(tx);
    return { kind: "claim_retry_scheduled", code, response };
  };

  /** QueuePendingClaimTransaction, the queued send and HandleClaimWebRequestCallback. */
  const queueClaim = async (steamId: string): Promise<EasyVote329Step> => {
    const tx = transactions.get(steamId);
    if (tx === undefined) return { kind: "silent" };
    if (tx.state === "ManualReview") return { kind: "nothing_sent", state: tx.state };
    if (tx.attempts >= EASY_VOTE_329_MAX_CLAIM_ATTEMPTS) {
      toManualReview(tx);
      return { kind: "nothing_sent", state: tx.state };
    }
    if (claimsInFlight.has(steamId)) return { kind: "nothing_sent", state: tx.state };
    claimsInFlight.add(steamId);
    scheduledRetries.delete(steamId);
    try {
      await config.beforeClaim?.(steamId, tx.attempts + 1);
      await config.queue?.wait(true);
      if (!isActive(tx)) return { kind: "silent" };
      tx.attempts++;
      tx.state = "Sent";
      stats.claimRequests++;
      const res = await request(config.site.claimUrl, tx.player);
      if (res.status !== 200) stats.claimFailures++;
      const response = res.body.trim();
      if (res.status === 200) stats.claimAnswers[response === "0" || response === "1" || response === "2" ? response : "other"]++;
      if (!isActive(tx)) return { kind: "silent" };
      if (res.status !== 200) return ambiguous(tx, res.status, res.body);
      if (response === "1") return confirm(tx, "claim 1");
      if (response === "2") {
        if (tx.hadAmbiguousFailure) return confirm(tx, "claim 2 after an ambiguous attempt");
        remove(steamId);
        return { kind: "told_already_voted" };
      }
      if (response === "0") {
        remove(steamId);
        return { kind: "told_not_voted" };
      }
      return ambiguous(tx, res.status, response);
    } finally {
      claimsInFlight.delete(steamId);
    }
  };

  return {
    transactions,
    payments,
    scheduledRetries,
    stats,
    async checkVotingStatus(player) {
      const steamId = player.steamId;
      const existing = transactions.get(steamId);
      if (existing !== undefined) {
        // A transaction waiting for manual review is released, and the status asked again; any other is re-queued instead.
        if (existing.state === "ManualReview") remove(steamId);
        else return queueClaim(steamId);
      }
      if (statusInFlight.has(steamId)) return { kind: "nothing_sent", state: "status in flight" };
      statusInFlight.add(steamId);
      let res: RawHttpAnswer;
      try {
        await config.queue?.wait(false);
        stats.statusRequests++;
        res = await request(config.site.statusUrl, player);
      } finally {
        statusInFlight.delete(steamId);
      }
      if (res.status !== 200) return { kind: "status_error", code: res.status };
      const response = res.body.trim();
      const current = transactions.get(steamId);
      if (response === "1") {
        // EnqueueClaimRequest: a new transaction, or the existing one (reset when it waited for manual review).
        if (current === undefined) {
          transactions.set(steamId, { transactionId: `tx${++sequence}`, player, attempts: 0, state: "Created", hadAmbiguousFailure: false });
        } else if (current.state === "ManualReview") {
          Object.assign(current, { attempts: 0, state: "Created", hadAmbiguousFailure: false });
        }
        return queueClaim(steamId);
      }
      if (response === "0") {
        if (current !== undefined) remove(steamId);
        return { kind: "told_not_voted" };
      }
      if (response === "2") {
        if (current?.hadAmbiguousFailure) return confirm(current, "status 2 after an ambiguous attempt");
        if (current !== undefined) remove(steamId);
        return { kind: "told_already_voted" };
      }
      return { kind: "silent" };
    },
    async retryClaims(isDue = () => true) {
      const due = [...scheduledRetries].filter(([, retry]) => isDue(retry)).map(([steamId]) => steamId);
      return Promise.all(
        due.map((steamId) => {
          scheduledRetries.delete(steamId);
          return queueClaim(steamId);
        }),
      );
    },
    paidCount(steamId) {
      return payments.filter((p) => p.steamId === steamId).length;
    },
  };
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
export async function fivemCheckVote(config: FiveMConfig, player: FiveMPlayer, hooks: PluginHooks = {}): Promise<FiveMOutcome> {
  const urls = fivemUrls(config, player);
  if (urls === undefined) return "steam_not_found";
  const status = await pluginRequest(urls.status);
  if (status.status !== 200) return { error: "status", statusCode: status.status };
  if (luaFind(status.body, "0")) return "vote_not_found";
  if (luaFind(status.body, "1")) {
    await hooks.beforeClaim?.();
    return fivemClaim(urls.claim);
  }
  if (luaFind(status.body, "2")) return "vote_already_claimed";
  return "no_match";
}

/** The script's claim request alone (the inner PerformHttpRequest). */
export async function fivemClaim(claimUrl: string): Promise<FiveMOutcome> {
  const claim = await pluginRequest(claimUrl);
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
  const res = await pluginRequest(url);
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
export async function voteRewardQuery(vrc: VrcFile, playerName: string, hooks: PluginHooks = {}): Promise<VoteRewardOutcome> {
  const fill = (template: string) => template.replace("{USERNAME}", phpUrlencode(playerName.toLowerCase()));
  const check = await fetchVrc(fill(vrc.check));
  if (check === undefined) return { kind: "error", url: fill(vrc.check) };
  if (!(check.voted && !check.claimed)) return { kind: "nothing", ...check };
  await hooks.beforeClaim?.();
  const claim = await fetchVrc(fill(vrc.claim));
  if (claim === undefined) return { kind: "error", url: fill(vrc.claim) };
  return claim.voted && claim.claimed ? { kind: "rewarded" } : { kind: "nothing", ...claim };
}

// ---------------------------------------------------------------------------------------------------
// RocketMod Votifier (Unturned)

/** A RocketMod Votifier service: its APIKey and its ServiceDefinition's two URLs (C# format strings, {0} key, {1} player). */
export interface RocketModService {
  apiKey: string;
  checkHasVoted: string;
  reportSuccess: string;
}

/** VotifierWebclient's default timeout. */
const ROCKETMOD_TIMEOUT_MS = 5_000;

/** What /reward did. `rewarded` happened on the check's "1", before the report; `report` is what the plugin never reads. */
export type RocketModOutcome =
  | { kind: "rewarded"; report: { status: number; body: string } }
  | { kind: "told_not_voted" }
  | { kind: "told_already_voted" }
  /** Any other body: the switch has no case for it. */
  | { kind: "silent" }
  /** The check failed (non-2xx, or no answer): e.Result throws in the handler, nothing is queued. */
  | { kind: "error"; status: number };

/**
 * The /reward command (Vote with giveItemDirectly) for one service: the check, and on its exact "1" the reward at once,
 * then the ReportSuccess request, whose outcome the plugin ignores (returned here only for the test to see).
 */
export async function rocketModReward(service: RocketModService, steamId: string, hooks: PluginHooks = {}): Promise<RocketModOutcome> {
  const check = await pluginRequest(formatCs(service.checkHasVoted, service.apiKey, steamId), ROCKETMOD_TIMEOUT_MS);
  if (check.status < 200 || check.status > 299) return { kind: "error", status: check.status };
  if (check.body === "0") return { kind: "told_not_voted" };
  if (check.body === "2") return { kind: "told_already_voted" };
  if (check.body !== "1") return { kind: "silent" };
  // OnPlayerVoted has given the reward; the report is requested after it and its answer is never read.
  await hooks.beforeClaim?.();
  const report = await pluginRequest(formatCs(service.reportSuccess, service.apiKey, steamId), ROCKETMOD_TIMEOUT_MS);
  return { kind: "rewarded", report: { status: report.status, body: report.body } };
}

// ---------------------------------------------------------------------------------------------------
// The plugins' preset list entries, verbatim from their sources (the host is what an owner changes)

/**
 * Each plugin's default entries for the lists whose API this gateway speaks, copied character for character:
 * EasyVoteExtended 3.0.4 and 3.2.9 ("Voting Sites API Information" defaults: rustserverlist only in 3.2.x), the
 * FiveM script's `endpoints` (server/server.lua, with Config.identifier spliced in), VoteReward's `.vrc` written by
 * its migration (Main.php; `K` is where it puts the API key) and RocketMod Votifier's unturned-servers.net service
 * (Config.cs). Only the host is to be replaced (withHost).
 */
export const PLUGIN_PRESETS = {
  easyVote: {
    "rust-servers.net": {
      status: "https://rust-servers.net/api/?object=votes&element=claim&key={0}&steamid={1}",
      claim: "https://rust-servers.net/api/?action=custom&object=plugin&element=reward&key={0}&steamid={1}",
    },
    "rustservers.gg": {
      status: "https://rustservers.gg/vote-api.php?action=status&key={0}&server={2}&steamid={1}",
      claim: "https://rustservers.gg/vote-api.php?action=claim&key={0}&server={2}&steamid={1}",
    },
    "bestservers.com": {
      status: "https://bestservers.com/api/vote.php?action=status&key={0}&steamid={1}",
      claim: "https://bestservers.com/api/vote.php?action=claim&key={0}&steamid={1}",
    },
    "trackyserver.com": {
      status: "https://api.trackyserver.com/vote/?action=status&key={0}&steamid={1}",
      claim: "https://api.trackyserver.com/vote/?action=claim&key={0}&steamid={1}",
    },
    "rustserverlist.com": {
      status: "https://rustserverlist.com/api/vote?action=status&key={0}&steamid={1}",
      claim: "https://rustserverlist.com/api/vote?action=claim&key={0}&steamid={1}",
    },
  },
  /** server/server.lua's `endpoints` base (the part before `?`). */
  fivemApiUrl: "https://api.trackyserver.com/vote/",
  /** Main.php's migration: `{"website","check","claim"}` with the API key in place of `K`. */
  voteReward: {
    check: "http://minecraftpocket-servers.com/api-vrc/?object=votes&element=claim&key=K&username={USERNAME}",
    claim: "http://minecraftpocket-servers.com/api-vrc/?action=post&object=votes&element=claim&key=K&username={USERNAME}",
  },
  rocketMod: {
    checkHasVoted: "https://unturned-servers.net/api/?object=votes&element=claim&key={0}&steamid={1}",
    reportSuccess: "https://unturned-servers.net/api/?action=post&object=votes&element=claim&key={0}&steamid={1}",
  },
} as const;

/** `url` with its scheme and host replaced by `base` (e.g. `http://127.0.0.1:1234`): the one edit an owner makes. */
export function withHost(url: string, base: string): string {
  return base + url.slice(url.indexOf("/", url.indexOf("//") + 2));
}

/**
 * EasyVoteExtended 3.0.4's FormatApiUrl equivalent: `string.Format(link, IDKey[1], player)` with the "ID:KEY" value
 * split at EVERY ':' (Split(':')), nothing escaped by the plugin; {2} (the id) only for a site named "rustservers.gg";
 * in username mode {1} is the raw displayName. Oxide's web request then parses the URL with System.Uri, which escapes a
 * space and non-ASCII characters (%XX of UTF-8) and leaves reserved characters as they are (encodeURI's rule).
 */
export function easyVote304Url(template: string, siteName: string, usesUsername: boolean, credentials: string, player: RustPlayer): string {
  const idKey = credentials.split(":");
  const [id, key] = [idKey[0] ?? "", idKey[1] ?? ""];
  const args = usesUsername ? [key, player.displayName] : siteName.toLowerCase() === "rustservers.gg" ? [key, player.steamId, id] : [key, player.steamId];
  const holes = [...template.matchAll(/\{(\d+)\}/g)].map((m) => Number(m[1]));
  // string.Format throws FormatException for a hole past its arguments: the plugin's request is never sent.
  if (holes.some((n) => n >= args.length)) throw new Error(`FormatException: ${template} needs more than ${args.length} arguments`);
  return encodeURI(formatCs(template, ...args));
}

/** What EasyVoteExtended 3.0.4 said or did: the status only tells (claiming is the player's /claim), answers compared exactly. */
export type EasyVote304Outcome = "told_no_rewards" | "told_to_claim" | "told_already_voted" | "rewarded" | "told_claim_status" | "silent" | { error: number };

/** EasyVoteExtended 3.0.4's status request (CheckVotingStatus), parsed as HandleStatusWebRequestCallback does. */
export async function easyVote304Status(url: string): Promise<EasyVote304Outcome> {
  const res = await pluginRequest(url, EASY_VOTE_321_TIMEOUT_MS);
  if (res.status !== 200) return { error: res.status };
  return res.body === "0" ? "told_no_rewards" : res.body === "1" ? "told_to_claim" : res.body === "2" ? "told_already_voted" : "silent";
}

/** EasyVoteExtended 3.0.4's claim request (/claim), parsed as HandleClaimWebRequestCallback does: "1" pays. */
export async function easyVote304Claim(url: string): Promise<EasyVote304Outcome> {
  const res = await pluginRequest(url, EASY_VOTE_321_TIMEOUT_MS);
  if (res.status !== 200) return { error: res.status };
  return res.body === "1" ? "rewarded" : res.body === "2" ? "told_already_voted" : "told_claim_status";
}
