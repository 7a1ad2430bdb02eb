/**
 * The fault campaign's pay-once phase (scripts/faults.ts, `FAULTS_PHASES=pay-once`): does a reward plugin that
 * follows its published retry rule ever pay a heart another transport paid?
 *
 * Game servers in pay-once mode, each with a claim key and an HTTP callback endpoint. Hearts with distinct SteamID64s
 * are cast through them at a steady rate. The receiver verifies each callback and answers 200 (85 %), 500 (10 %) or
 * never (5 %: the delivery's timeout ends the attempt, in doubt). On each server a client following EasyVoteExtended
 * 3.2.9 (scripts/harness/plugin-clients.ts: its claim transaction, request queue and retry rule) checks each player as
 * soon as the heart is cast (the player's /claim), again on its automatic checks, and retries its claims on its
 * schedule; the plugin's timers run `pluginTimeScale` times as fast. Meanwhile the gateway, the referral service and
 * the delivery process are SIGKILLed and started again, one after the other.
 *
 * Per heart, the payments are the receiver's (a 2xx acknowledgement, counted once per heart_id, as the contract tells
 * receivers to) plus the plugin's rewards: paid once, paid twice, or unpaid.
 */
import pg from "pg";
import { markdownTable } from "../../bench/lib/infra.js";
import { checkServerCallback } from "../harness/e2e-support.js";
import {
  createEasyVoteExtended329,
  createVoteRequestQueue,
  type EasyVoteExtended329,
  type EasyVotePayment,
  type RustPlayer,
  type VoteRequestQueue,
} from "../harness/plugin-clients.js";
import { startReceiver, type Receiver } from "../harness/receiver.js";
import type { ServiceClients } from "../harness/stack.js";
import { STEAM_ID64_MIN } from "../../services/shared/values/player-ids.js";
import { createLimiter, sleep, withRetries } from "./campaign-clients.js";

/** The heading of the phase's section in RELIABILITY.md. */
export const PAY_ONCE_HEADING = "## Pay once across transports";

/** The receiver's answers: 200 for this share of the callbacks, 500 for the next share, none (a hang) for the rest. */
const RECEIVER_OK_SHARE = 0.85;
const RECEIVER_500_SHARE = 0.1;
/** EasyVoteExtended 3.2.9's DefaultAutomaticVoteCheckInterval, seconds (scaled by pluginTimeScale). */
const AUTOMATIC_CHECK_INTERVAL_S = 300;
/** How often the phase looks at its players (fires due retries and checks, reads what the database settled). */
const TICK_MS = 250;
/** How often the database is asked which hearts are settled. */
const SETTLE_QUERY_MS = 1_000;
/** Casts (and first checks) in flight at most. */
const MAX_CASTS_IN_FLIGHT = 8;
/** The processes killed and restarted during the phase, in this order, evenly spread over it. */
const KILL_ORDER: PayOnceKillRole[] = ["gateway", "referral-service", "delivery", "gateway", "referral-service", "gateway", "referral-service"];
/** How long a gateway or referral-service kill waits for a plugin's queued claim before it falls anyway. */
const KILL_AIM_MS = 10_000;
/** How often the aim looks at the plugins' queues. */
const AIM_POLL_MS = 5;
/** Paid-twice hearts listed one by one in the report, at most. */
const MAX_LISTED = 20;

/** A process the phase kills. */
export type PayOnceKillRole = "gateway" | "referral-service" | "delivery";

/** The phase's settings. */
export interface PayOncePhaseSettings {
  hearts: number;
  /** Over how long the hearts are cast (the kills fall inside it). */
  durationMs: number;
  /** How long, after the last cast, the phase waits for every heart to settle. */
  drainMs: number;
  servers: number;
  /** The delivery process's callback timeout (a hung answer outlasts it). */
  callbackTimeoutMs: number;
  /** The plugin's timers (claim retries 10-300 s, automatic checks 300 s) are multiplied by this. */
  pluginTimeScale: number;
}

/** What the phase needs from the campaign. */
export interface PayOncePhaseDeps {
  clients: ServiceClients;
  gatewayUrl: string;
  databaseUrl: string;
  progress(line: string): void;
  /** SIGKILLs the role's process and starts a new one on the same port; resolves once it is ready, with the seconds that took. */
  killAndRestart(role: PayOnceKillRole): Promise<number>;
  /** The campaign's next heart number (one /24 per heart across phases, so the fraud rules stay quiet). */
  nextHeartNumber(): number;
  settings: PayOncePhaseSettings;
}

/** One paid-twice heart, for the report. */
export interface TwicePaid {
  heartId: string;
  receiverAcks: number;
  pluginPayments: EasyVotePayment["confirmedBy"][];
}

/** The phase's outcome. */
export interface PayOnceResult {
  settings: PayOncePhaseSettings;
  at: string;
  heartsCast: number;
  counted: number;
  /** Casts that did not count (a reason from the service), and casts given up after retrying. */
  notCounted: number;
  castsGivenUp: number;
  paidOnce: number;
  paidTwice: number;
  unpaid: number;
  /** Paid twice when a callback the receiver never answered counts as paid (it may have acted before it hung). */
  paidTwiceCountingHung: number;
  /** How the paid-once hearts were paid. */
  paidBy: { callback: number; pluginClaim1: number; pluginAfterAmbiguous: number };
  twice: TwicePaid[];
  /** Hearts not settled when the drain ended (still pending, or a claim transaction still open). */
  unsettled: number;
  /** `aimed`: the kill fell while a plugin had a claim queued. */
  kills: { role: PayOnceKillRole; atSeconds: number; aimed: boolean; secondsToReady: number }[];
  receiver: { requests: number; ok: number; refused500: number; hung: number; invalidSignatures: number };
  plugin: { statusRequests: number; claimRequests: number; claimFailures: number; claimAnswers: Record<string, number>; manualReviews: number };
  seconds: number;
}

interface Player {
  server: number;
  heartId: string;
  rust: RustPlayer;
  nextCheckAt: number;
  settled: boolean;
}

interface PayOnceReceiver {
  receiver: Receiver;
  /** heart_id -> 2xx acknowledgements. */
  acked: Map<string, number>;
  /** heart_ids of callbacks never answered. */
  hung: Set<string>;
  counts: PayOnceResult["receiver"];
}

/** The receiver of the pay-once servers' callbacks: verifies each one, then answers 200, 500 or nothing at random. */
async function startPayOnceReceiver(secrets: Map<string, string>): Promise<PayOnceReceiver> {
  const acked = new Map<string, number>();
  const hung = new Set<string>();
  const counts = { requests: 0, ok: 0, refused500: 0, hung: 0, invalidSignatures: 0 };
  const receiver = await startReceiver({
    fallback: (request) => {
      counts.requests++;
      const check = checkServerCallback(request, secrets);
      if (!check.ok) {
        counts.invalidSignatures++;
        return { status: 401, body: check.reason };
      }
      const heartId = String(check.body.heart_id);
      const draw = Math.random();
      if (draw < RECEIVER_OK_SHARE) {
        counts.ok++;
        if (check.body.event === "heart.counted") acked.set(heartId, (acked.get(heartId) ?? 0) + 1);
        return { status: 200, body: "ok" };
      }
      if (draw < RECEIVER_OK_SHARE + RECEIVER_500_SHARE) {
        counts.refused500++;
        return { status: 500, body: "random failure" };
      }
      counts.hung++;
      hung.add(heartId);
      return { hang: true };
    },
  });
  return { receiver, acked, hung, counts };
}

/** Runs the phase; the receiver is closed before it returns. */
export async function runPayOncePhase(deps: PayOncePhaseDeps): Promise<PayOnceResult> {
  const { clients, settings, progress } = deps;
  const started = Date.now();
  const secrets = new Map<string, string>();
  const paying = await startPayOnceReceiver(secrets);
  const db = new pg.Client({ connectionString: deps.databaseUrl });
  await db.connect();
  try {
    const plugins: { plugin: EasyVoteExtended329; queue: VoteRequestQueue }[] = [];
    const serverIds: string[] = [];
    for (let i = 0; i < settings.servers; i++) {
      const { server } = await clients.admin.createServer({ name: `Pay-once campaign ${i + 1}`, registrationUrl: "" });
      const serverId = server!.id;
      serverIds.push(serverId);
      const { claimKey } = await clients.admin.rotateClaimKey({ serverId });
      await clients.admin.setCallbackSettings({ serverId, callbackUrl: paying.receiver.url, standardWebhooks: false });
      secrets.set(serverId, (await clients.admin.revealCallbackSecret({ serverId })).secret);
      await clients.admin.setClaimSettings({ serverId, paysOnce: true });
      // The status/claim family with server={2}, as an owner pastes it into EasyVoteExtended's config.
      const queue = createVoteRequestQueue();
      const site = {
        statusUrl: `${deps.gatewayUrl}/api/votes?action=status&key={0}&server={2}&steamid={1}`,
        claimUrl: `${deps.gatewayUrl}/api/votes?action=claim&key={0}&server={2}&steamid={1}`,
        usesUsername: false,
      };
      plugins.push({ plugin: createEasyVoteExtended329({ site, credentials: `${serverId}:${claimKey}`, queue }), queue });
    }

    const players = new Map<string, Player>();
    const inFlight = new Set<Promise<unknown>>();
    const track = (p: Promise<unknown>) => {
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    };
    const automaticCheckMs = AUTOMATIC_CHECK_INTERVAL_S * 1000 * settings.pluginTimeScale;
    const check = (player: Player) => {
      player.nextCheckAt = Date.now() + automaticCheckMs;
      track(plugins[player.server]!.plugin.checkVotingStatus(player.rust));
    };

    // Kills, evenly spread over the casting time.
    const kills: PayOnceResult["kills"] = [];
    const killing = (async () => {
      for (const [i, role] of KILL_ORDER.entries()) {
        const at = started + (settings.durationMs * (i + 1)) / (KILL_ORDER.length + 1);
        await sleep(Math.max(0, at - Date.now()));
        // The claims go through the gateway and the referral service: their kill falls while a plugin's check has
        // answered 1 and its claim waits for the queue's next slot (0-0.2 s), the moment issue 27's sequence needs.
        const claimQueued = () => plugins.some((p) => p.queue.waitingClaims > 0);
        const until = Date.now() + (role === "delivery" ? 0 : KILL_AIM_MS);
        while (!claimQueued() && Date.now() < until) await sleep(AIM_POLL_MS);
        const aimed = role !== "delivery" && claimQueued();
        const atSeconds = (Date.now() - started) / 1000;
        progress(`pay-once: SIGKILL ${role} at ${atSeconds.toFixed(1)} s${aimed ? " (a claim queued)" : ""}`);
        kills.push({ role, atSeconds, aimed, secondsToReady: await deps.killAndRestart(role) });
      }
    })();

    // Casts at a steady rate; each player asks for the reward as soon as the heart counted.
    // Individual-account SteamID64s (services/shared/values/player-ids.ts), a block of its own per run.
    const steamBase = STEAM_ID64_MIN + BigInt(Math.floor(Math.random() * 1e6)) * 1000n;
    let cast = 0;
    let castsGivenUp = 0;
    let notCounted = 0;
    const limiter = createLimiter(MAX_CASTS_IN_FLIGHT);
    const casting = (async () => {
      for (let i = 0; i < settings.hearts; i++) {
        await sleep(Math.max(0, started + (settings.durationMs * i) / settings.hearts - Date.now()));
        const n = deps.nextHeartNumber();
        const server = i % settings.servers;
        const steamId = (steamBase + BigInt(i)).toString();
        const serverId = serverIds[server]!;
        cast++;
        limiter.run(async () => {
          const { result, error } = await withRetries(() =>
            clients.hearts.castHeart({
              serverId,
              username: `Rust${n}`,
              voterIdentity: `pay-once-${n}`,
              ip: `100.${64 + Math.floor(n / 256)}.${n % 256}.9`,
              userAgent: "Mozilla/5.0 (X11; Linux x86_64) fault-campaign",
              steamId,
            }),
          );
          if (error !== undefined) {
            castsGivenUp++;
            if (castsGivenUp === 1) progress(`pay-once: a cast was given up: ${(error as Error).message}`);
            return;
          }
          if (!result?.counted) {
            notCounted++;
            if (notCounted === 1) progress(`pay-once: a heart did not count: ${result?.reason}`);
            return;
          }
          const player: Player = { server, heartId: result.heartId, rust: { steamId, displayName: `Rust${n}` }, nextCheckAt: 0, settled: false };
          players.set(steamId, player);
          check(player);
        });
      }
      await limiter.idle();
    })();

    // The plugin's timers and the settling, until every heart settled or the drain ends.
    let castingDone = false;
    let killsDone = false;
    const failed = (what: string) => (error: unknown) => {
      // Failure policy: report it and go on draining; the tally shows what the phase managed.
      progress(`pay-once: ${what} failed: ${(error as Error).message}`);
    };
    void casting.catch(failed("casting")).finally(() => (castingDone = true));
    void killing.catch(failed("a kill and restart")).finally(() => (killsDone = true));
    let lastSettleQuery = 0;
    let lastProgress = Date.now();
    let drainStarted: number | undefined;
    for (;;) {
      const now = Date.now();
      for (const { plugin } of plugins) {
        track(plugin.retryClaims((r) => now - r.scheduledAtMs >= r.delaySeconds * 1000 * settings.pluginTimeScale));
      }
      const open = [...players.entries()].filter(([, p]) => !p.settled);
      if (now - lastSettleQuery >= SETTLE_QUERY_MS && open.length > 0) {
        lastSettleQuery = now;
        const { rows } = await db.query<{ heart_id: string; state: string | null; pending: boolean }>(
          `SELECT h.id::text AS heart_id, p.state,
                  EXISTS (SELECT 1 FROM deliveries d WHERE d.heart_id = h.id AND d.status = 'pending') AS pending
           FROM unnest($1::uuid[]) AS h(id) LEFT JOIN heart_payouts p ON p.heart_id = h.id`,
          [open.map(([, p]) => p.heartId)],
        );
        const byHeart = new Map(rows.map((r) => [r.heart_id, r]));
        for (const [steamId, player] of open) {
          const row = byHeart.get(player.heartId);
          const plugin = plugins[player.server]!.plugin;
          if (row === undefined || plugin.transactions.has(steamId) || plugin.scheduledRetries.has(steamId)) continue;
          // Paid, or kept in doubt for good by a push that has no attempt left: nothing can change any more.
          if (row.state === "paid" || (row.state === "reserved" && !row.pending)) player.settled = true;
          // Held with nothing pending: the player asks again (the plugin pays it, or is told who did).
          else if (row.state === null && !row.pending && castingDone) player.nextCheckAt = Math.min(player.nextCheckAt, now);
        }
      }
      for (const [, player] of open) {
        if (!player.settled && player.nextCheckAt <= now && plugins[player.server]!.queue.waitingStatusRequests === 0) check(player);
      }
      if (castingDone && killsDone && drainStarted === undefined) {
        drainStarted = now;
        progress(`pay-once: ${players.size} hearts counted; draining`);
      }
      const allSettled = castingDone && killsDone && [...players.values()].every((p) => p.settled) && inFlight.size === 0;
      if (allSettled || (drainStarted !== undefined && now - drainStarted > settings.drainMs)) break;
      if (now - lastProgress > 10_000) {
        lastProgress = now;
        progress(`pay-once: ${cast} cast, ${players.size} counted, ${open.length} not settled, ${paying.counts.ok} callbacks acknowledged`);
      }
      await sleep(TICK_MS);
    }
    await Promise.allSettled([...inFlight]);

    return tally(deps, { started, cast, notCounted, castsGivenUp, players, plugins: plugins.map((p) => p.plugin), paying, kills });
  } finally {
    await db.end();
    await paying.receiver.close();
  }
}

/** Counts each heart's payments: the receiver's (once per heart_id) plus the plugin's rewards. */
function tally(
  deps: PayOncePhaseDeps,
  run: {
    started: number;
    cast: number;
    notCounted: number;
    castsGivenUp: number;
    players: Map<string, Player>;
    plugins: EasyVoteExtended329[];
    paying: PayOnceReceiver;
    kills: PayOnceResult["kills"];
  },
): PayOnceResult {
  const result: PayOnceResult = {
    settings: deps.settings,
    at: new Date().toISOString(),
    heartsCast: run.cast,
    counted: run.players.size,
    notCounted: run.notCounted,
    castsGivenUp: run.castsGivenUp,
    paidOnce: 0,
    paidTwice: 0,
    unpaid: 0,
    paidTwiceCountingHung: 0,
    paidBy: { callback: 0, pluginClaim1: 0, pluginAfterAmbiguous: 0 },
    twice: [],
    unsettled: [...run.players.values()].filter((p) => !p.settled).length,
    kills: run.kills,
    receiver: run.paying.counts,
    plugin: { statusRequests: 0, claimRequests: 0, claimFailures: 0, claimAnswers: { "0": 0, "1": 0, "2": 0, other: 0 }, manualReviews: 0 },
    seconds: (Date.now() - run.started) / 1000,
  };
  for (const plugin of run.plugins) {
    const s = plugin.stats;
    result.plugin.statusRequests += s.statusRequests;
    result.plugin.claimRequests += s.claimRequests;
    result.plugin.claimFailures += s.claimFailures;
    result.plugin.manualReviews += s.manualReviews;
    for (const [answer, n] of Object.entries(s.claimAnswers)) result.plugin.claimAnswers[answer] = (result.plugin.claimAnswers[answer] ?? 0) + n;
  }
  for (const [steamId, player] of run.players) {
    const plugin = run.plugins[player.server]!;
    const pluginPayments = plugin.payments.filter((p) => p.steamId === steamId).map((p) => p.confirmedBy);
    const acks = run.paying.acked.get(player.heartId) ?? 0;
    const paid = (acks > 0 ? 1 : 0) + pluginPayments.length;
    const mayHavePaid = (acks > 0 || run.paying.hung.has(player.heartId) ? 1 : 0) + pluginPayments.length;
    if (mayHavePaid >= 2) result.paidTwiceCountingHung++;
    if (paid === 0) result.unpaid++;
    else if (paid >= 2) {
      result.paidTwice++;
      result.twice.push({ heartId: player.heartId, receiverAcks: acks, pluginPayments });
    } else {
      result.paidOnce++;
      if (acks > 0) result.paidBy.callback++;
      else if (pluginPayments[0] === "claim 1") result.paidBy.pluginClaim1++;
      else result.paidBy.pluginAfterAmbiguous++;
    }
  }
  return result;
}

/** The phase's section of RELIABILITY.md (starting with PAY_ONCE_HEADING). */
export function payOnceSection(r: PayOnceResult): string {
  const s = r.settings;
  const scale = s.pluginTimeScale;
  const twiceRows = r.twice.slice(0, MAX_LISTED).map((t) => [`\`${t.heartId}\``, String(t.receiverAcks), t.pluginPayments.join(", ") || "none"]);
  const answers = r.plugin.claimAnswers;
  return `${PAY_ONCE_HEADING}

Written by \`npm run faults\` (its pay-once phase, \`scripts/lib/run-pay-once-phase.ts\`; \`FAULTS_PHASES=pay-once\` runs it
alone) on ${r.at.slice(0, 10)}; do not edit by hand, run it again.

**Result: of ${r.counted} counted hearts, ${r.paidOnce} paid exactly once, ${r.paidTwice} paid twice, ${r.unpaid} unpaid.**
${r.paidTwice === 0 ? "No heart was paid twice." : "HEARTS WERE PAID TWICE: see below."}

${s.servers} game servers in pay-once mode, each with a claim key and an HTTP callback endpoint. ${r.heartsCast} hearts,
each from a SteamID64 of its own, cast over ${(s.durationMs / 1000).toFixed(0)} s. The receiver verifies every callback and answers
200 (${Math.round(RECEIVER_OK_SHARE * 100)} %), 500 (${Math.round(RECEIVER_500_SHARE * 100)} %) or never (${Math.round((1 - RECEIVER_OK_SHARE - RECEIVER_500_SHARE) * 100)} %: the delivery gives up after its ${s.callbackTimeoutMs / 1000} s callback
timeout, an outcome in doubt). On each server a client that follows EasyVoteExtended 3.2.9
(\`scripts/harness/plugin-clients.ts\`: its claim transaction, its request queue of one request per 0.2 s, claims first)
checks each player as soon as the heart counted, again on its automatic checks (300 s), and retries a claim whose
answer was not 200 on its schedule (10, 10, 20, 30, 300 s; manual review after 6 attempts), paying on a claim
\`1\`, and on a claim or status \`2\` after an ambiguous attempt. The plugin's timers ran ${1 / scale} times as fast.
Meanwhile these processes were SIGKILLed and started again at once; a gateway or referral-service kill
waited (up to ${KILL_AIM_MS / 1000} s) for a moment when a plugin's check had answered \`1\` and its claim was queued for the
next slot, so that claim fails before it reaches the ledger:

${markdownTable(
  ["process", "killed at (s)", "a claim queued", "seconds to ready"],
  r.kills.map((k) => [k.role, k.atSeconds.toFixed(1), k.role === "delivery" ? "" : k.aimed ? "yes" : "no", k.secondsToReady.toFixed(1)]),
)}

A heart's payments are the receiver's 2xx acknowledgements (counted once per \`heart_id\`, as the contract tells
receivers to) plus the plugin's rewards.

| hearts | count |
| --- | ---: |
| paid exactly once | ${r.paidOnce} |
| of which by the callback | ${r.paidBy.callback} |
| of which by the plugin's claim \`1\` | ${r.paidBy.pluginClaim1} |
| of which by the plugin on a \`2\` after an ambiguous claim | ${r.paidBy.pluginAfterAmbiguous} |
| **paid twice** | **${r.paidTwice}** |
| unpaid | ${r.unpaid} |
| paid twice if a callback the receiver never answered counts as paid (it may have acted on it) | ${r.paidTwiceCountingHung} |
| not settled when the drain ended | ${r.unsettled} |

${
  r.twice.length === 0
    ? ""
    : `Paid twice${r.twice.length > MAX_LISTED ? ` (the first ${MAX_LISTED})` : ""}:

${markdownTable(["heart", "receiver 2xx", "plugin paid on"], twiceRows)}

`
}- Hearts cast ${r.heartsCast}: counted ${r.counted}, not counted ${r.notCounted}, given up after retrying ${r.castsGivenUp}.
- The plugin: ${r.plugin.statusRequests} status requests, ${r.plugin.claimRequests} claims (${r.plugin.claimFailures} not answered 200; answered
  \`1\` ${answers["1"] ?? 0}, \`2\` ${answers["2"] ?? 0}, \`0\` ${answers["0"] ?? 0}, other ${answers.other ?? 0}); ${r.plugin.manualReviews} transactions reached manual review.
- The receiver: ${r.receiver.requests} callbacks, ${r.receiver.ok} answered 200, ${r.receiver.refused500} answered 500, ${r.receiver.hung} never answered,
  ${r.receiver.invalidSignatures} failing verification.
- The phase took ${r.seconds.toFixed(1)} s.
`;
}
