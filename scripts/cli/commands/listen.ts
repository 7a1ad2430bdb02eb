/**
 * `listen --forward-to URL`: relays a server's counted hearts to a receiver on this machine through
 * the signed pull API (gateway /api/pull/hearts and /api/pull/claims, docs/votifier-and-pull.md), so
 * no public URL or tunnel is needed. Each heart is POSTed exactly as the delivery service sends a
 * callback: the same body builder and signer (services/delivery/pipeline/send-callback.ts signCallback) and the
 * same sender (sendCallback), keyed with the server's callback secret. Each listed page is claimed
 * first and only the hearts the claim answered `claimed` are forwarded: on a pay-once server another
 * transport (an in-game claim, the callback, Votifier) may have paid a listed heart meanwhile, and the
 * claim is what decides (`already_claimed` or `unknown`: not forwarded, and said so). A claimed heart the
 * receiver refused is no longer listed, so listen keeps it and forwards it again itself.
 * With `--forward-to votifier://host:port` each heart is sent instead as a Votifier v2 vote to a
 * local NuVotifier listener, with the delivery service's own sender (send-votifier.ts).
 */
import type { PullClaimStatus } from "../../../services/delivery/rpc/claim-pull-hearts.js";
import { MAX_PULL_CLAIM } from "../../../services/shared/values/wire.js";
import { CALLBACK_TIMEOUT_MS, sendCallback, signCallback } from "../../../services/delivery/pipeline/send-callback.js";
import { VOTIFIER_TIMEOUT_MS, VOTIFIER_VOTE_ADDRESS, sendVotifierVote } from "../../../services/delivery/pipeline/send-votifier.js";
import { formatIngestSignature } from "../../../services/shared/values/signature.js";
import { stringFlag, type Command, type CommandContext } from "../command.js";
import type { CliConfig } from "../config.js";
import { CLI_RUN } from "../name.js";
import { CliError, EXIT_OK, EXIT_USAGE } from "../output.js";
import { callRpc, createClients } from "../rpc.js";

/** The gateway's pull endpoints (gateway/handle-pull.ts PULL_HEARTS_PATH, PULL_CLAIMS_PATH; the CLI test checks they are equal). */
export const PULL_PATHS = { hearts: "/api/pull/hearts", claims: "/api/pull/claims" } as const;
const DEFAULT_INTERVAL_MS = 1000;
/** A claimed heart the receiver refused waits at least this long, doubling per failure up to the cap, before it is forwarded again. */
const RETRY_BASE_MS = 2000;
const RETRY_CAP_MS = 30_000;
const PAGE_LIMIT = 100;
const GATEWAY_TIMEOUT_MS = 15_000;

interface PulledHeart {
  heart_id: string;
  username: string;
  period: string;
  counted_at: string | null;
  streak_day?: number;
}

/** Why a heart the claim did not grant is not forwarded, as listen prints it. */
const NOT_GRANTED_TEXT: Record<Exclude<PullClaimStatus, "claimed">, string> = {
  already_claimed: "already_claimed (paid by another transport first, or claimed before)",
  unknown: "unknown (no longer a pullable heart of this server)",
};

/** A gateway answer the loop cannot continue after (bad secret, pull off, unknown server). */
class PullRefused extends Error {}

async function postSigned(gatewayUrl: string, path: string, pullSecret: string, payload: object, signal: AbortSignal): Promise<unknown> {
  const body = JSON.stringify(payload);
  const t = Math.floor(Date.now() / 1000);
  const response = await fetch(`${gatewayUrl}${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Service-Signature": formatIngestSignature(pullSecret, t, body) },
    body,
    signal: AbortSignal.any([signal, AbortSignal.timeout(GATEWAY_TIMEOUT_MS)]),
  });
  const text = await response.text();
  if (response.ok) return JSON.parse(text);
  let reason = text;
  try {
    reason = (JSON.parse(text) as { error?: string }).error ?? text;
  } catch {
    // Failure policy: a non-JSON error body is shown as text.
  }
  if (response.status === 401 || response.status === 404 || response.status === 400) throw new PullRefused(`${response.status}: ${reason}`);
  throw new Error(`the gateway answered ${response.status}: ${reason}`);
}

async function resolveSecrets(ctx: CommandContext, serverId: string, needsCallbackSecret: boolean) {
  let pullSecret = stringFlag(ctx.flags, "pull-secret");
  // Votes are signed with the Votifier token, not the callback secret.
  let callbackSecret = needsCallbackSecret ? stringFlag(ctx.flags, "callback-secret") : undefined;
  let standardWebhooks = ctx.flags["standard-webhooks"] === true;
  if (pullSecret && (callbackSecret || !needsCallbackSecret)) return { pullSecret, callbackSecret: callbackSecret ?? "", standardWebhooks };
  // A secret not given is revealed with the service token (the admin's own tool; the secret is never printed).
  let config: CliConfig;
  try {
    config = ctx.config();
    config.token();
  } catch (error) {
    // Failure policy: without a token the secrets must come from flags; say which.
    if (!(error instanceof CliError)) throw error;
    const missing = [pullSecret ? undefined : "--pull-secret", callbackSecret || !needsCallbackSecret ? undefined : "--callback-secret"].filter(Boolean);
    throw new CliError(`${missing.join(" and ")} not given, and ${error.message} to reveal ${missing.length > 1 ? "them" : "it"} with`, {
      hint: `pass ${missing.map((f) => `${f} ${f === "--pull-secret" ? "psec_..." : "whsec_..."}`).join(" and ")} (\`${CLI_RUN} servers create\` printed them), or a service token`,
      exitCode: EXIT_USAGE,
    });
  }
  const { admin } = createClients(config);
  const server = (await callRpc(config, "reading the server", (o) => admin.getServer({ serverId }, o))).server!;
  standardWebhooks ||= server.standardWebhooks;
  if (!pullSecret) {
    if (!server.pullEnabled) {
      throw new CliError(`the pull API is off for server ${serverId}`, {
        hint: "turn it on in the dashboard's integration tab (servers made by `servers create` have it on)",
      });
    }
    pullSecret = (await callRpc(config, "revealing the pull secret", (o) => admin.revealPullSecret({ serverId }, o))).secret;
  }
  if (needsCallbackSecret && !callbackSecret) {
    callbackSecret = (
      await callRpc(config, "revealing the callback secret", (o) => admin.revealCallbackSecret({ serverId }, o)).catch((error: unknown) => {
        // Failure policy: a server without a callback secret cannot sign what is forwarded; say how to get one.
        throw error instanceof CliError && /no callback secret/.test(error.message)
          ? new CliError(`server ${serverId} has no callback secret to sign forwarded hearts with`, {
              hint: "set a callback URL or rotate the callback secret in the dashboard, or pass --callback-secret whsec_...",
            })
          : error;
      })
    ).secret;
  }
  return { pullSecret, callbackSecret: callbackSecret ?? "", standardWebhooks };
}

/** Where hearts go: an HTTP receiver (signed callbacks) or a Votifier v2 listener (votes). */
type ForwardTarget = { kind: "http"; url: string } | { kind: "votifier"; host: string; port: number; token: string; serviceName: string; name: string };

/** The service name sent with each vote when --votifier-service is not given. */
const DEFAULT_VOTIFIER_SERVICE = "rcb";

function readForwardTarget(ctx: CommandContext): ForwardTarget {
  const target = stringFlag(ctx.flags, "forward-to");
  if (target?.startsWith("votifier://")) {
    let url: URL;
    try {
      url = new URL(target.replace(/^votifier:/, "http:"));
    } catch {
      // Failure policy: an unparseable target is a usage error.
      throw new CliError(`--forward-to ${target} is not a votifier://host:port address`, {
        hint: "for example --forward-to votifier://localhost:8192",
        exitCode: EXIT_USAGE,
      });
    }
    const token = stringFlag(ctx.flags, "votifier-token");
    if (token === undefined) {
      throw new CliError("--votifier-token is required with a votifier:// target", { hint: "the token from NuVotifier's config.yml", exitCode: EXIT_USAGE });
    }
    const port = url.port === "" ? 8192 : Number(url.port);
    return {
      kind: "votifier",
      host: url.hostname,
      port,
      token,
      serviceName: stringFlag(ctx.flags, "votifier-service") ?? DEFAULT_VOTIFIER_SERVICE,
      name: `votifier://${url.host}`,
    };
  }
  return { kind: "http", url: readForwardTo(target) };
}

function readForwardTo(target: string | undefined): string {
  if (target === undefined)
    throw new CliError("--forward-to is required", { hint: "for example --forward-to http://localhost:3000/hook", exitCode: EXIT_USAGE });
  let url: URL;
  try {
    url = new URL(/^[a-z]+:\/\//i.test(target) ? target : `http://${target}`);
  } catch {
    // Failure policy: an unparseable target is a usage error.
    throw new CliError(`--forward-to ${target} is not a URL`, { hint: "for example --forward-to http://localhost:3000/hook", exitCode: EXIT_USAGE });
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new CliError("--forward-to must be an http(s) URL", { exitCode: EXIT_USAGE });
  return url.toString();
}

/** Waits `ms`, or less when `signal` aborts; its abort listener is removed either way (one poll, one listener). */
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });

export const listen: Command = {
  name: "listen",
  summary: "forward a server's counted hearts to a local receiver, signed as real callbacks, over the pull API (no public URL needed)",
  usage:
    "--server ID --forward-to URL|votifier://HOST:PORT [--pull-secret psec_...] [--callback-secret whsec_...] [--standard-webhooks] [--interval MS] [--votifier-token T]",
  flagHelp: [
    ["--server ID", "the server whose hearts are forwarded"],
    ["--forward-to URL", "your receiver, for example http://localhost:3000/hook"],
    ["--pull-secret psec_...", "signs the pull API requests (default: revealed with the service token)"],
    ["--callback-secret whsec_...", "signs each forwarded heart as the service signs callbacks (default: revealed with the service token)"],
    ["--standard-webhooks", "also send the Standard Webhooks headers (default: the server's setting, when a token can read it)"],
    ["--interval MS", `how often to poll (default ${DEFAULT_INTERVAL_MS})`],
    ["--votifier-token T", "with --forward-to votifier://host:port: send each heart as a Votifier v2 vote signed with NuVotifier's token"],
    ["--votifier-service NAME", `the vote's serviceName (default ${DEFAULT_VOTIFIER_SERVICE})`],
  ],
  flags: {
    server: { type: "string" },
    "forward-to": { type: "string" },
    "pull-secret": { type: "string" },
    "callback-secret": { type: "string" },
    "standard-webhooks": { type: "boolean" },
    interval: { type: "string" },
    "votifier-token": { type: "string" },
    "votifier-service": { type: "string" },
  },
  examples: [
    `${CLI_RUN} listen --server 0b7c... --forward-to http://localhost:3000/hook`,
    `${CLI_RUN} listen --server 0b7c... --forward-to votifier://localhost:8192 --votifier-token <token from NuVotifier's config.yml>`,
  ],
  async run(ctx) {
    const serverId = stringFlag(ctx.flags, "server");
    if (serverId === undefined) throw new CliError("--server is required", { hint: `\`${CLI_RUN} servers list\` shows the ids`, exitCode: EXIT_USAGE });
    const target = readForwardTarget(ctx);
    const forwardTo = target.kind === "http" ? target.url : target.name;
    const intervalText = stringFlag(ctx.flags, "interval");
    const intervalMs = intervalText === undefined ? DEFAULT_INTERVAL_MS : Number(intervalText);
    if (!Number.isInteger(intervalMs) || intervalMs < 100)
      throw new CliError("--interval must be a whole number of milliseconds, at least 100", { exitCode: EXIT_USAGE });
    const { pullSecret, callbackSecret, standardWebhooks } = await resolveSecrets(ctx, serverId, target.kind === "http");
    const gatewayUrl = ctx.config().gatewayUrl;
    const stop = ctx.interrupted;
    /** Hearts this run claimed that the target has not accepted yet (claimed hearts are not listed again): when each is forwarded again. */
    const held = new Map<string, { heart: PulledHeart; failures: number; notBefore: number }>();
    let forwarded = 0;
    let notGranted = 0;
    let gatewayDown = false;

    ctx.out.progress(`Ready! Forwarding counted hearts of ${serverId} to ${forwardTo} (polling ${gatewayUrl} every ${intervalMs} ms). Ctrl-C to stop.`);
    const label = target.kind === "votifier" ? "vote" : "heart.counted";
    /** Sends one heart to the target; the outcome as status text, latency and error. */
    const send = async (heart: PulledHeart): Promise<{ ok: boolean; status: number | undefined; latencyMs: number; error: string }> => {
      if (target.kind === "votifier") {
        const timestamp = heart.counted_at ? Date.parse(heart.counted_at) : Date.now();
        const vote = await sendVotifierVote(
          target,
          { serviceName: target.serviceName, username: heart.username, address: VOTIFIER_VOTE_ADDRESS, timestamp },
          { timeoutMs: VOTIFIER_TIMEOUT_MS, allowInsecure: true },
        );
        return { ok: vote.kind === "delivered", status: undefined, latencyMs: vote.latencyMs, error: vote.error ?? "" };
      }
      const signed = signCallback({
        url: forwardTo,
        fields: {
          event: "heart.counted",
          serverId,
          username: heart.username,
          heartId: heart.heart_id,
          period: heart.period,
          ...(heart.streak_day === undefined ? {} : { streakDay: heart.streak_day }),
        },
        secretsNewestFirst: [callbackSecret],
        standardWebhooks,
        t: Math.floor(Date.now() / 1000),
      });
      const outcome = await sendCallback(signed, { timeoutMs: CALLBACK_TIMEOUT_MS, allowInsecure: true, now: () => new Date() });
      return {
        ok: outcome.kind === "delivered",
        status: outcome.status,
        latencyMs: outcome.latencyMs,
        error: outcome.kind === "failed" ? outcome.error : outcome.kind === "gone" ? "410 Gone (the service would disable the callback)" : "",
      };
    };
    /** Forwards a heart this run claimed; one the target refused is held and forwarded again after a backoff. */
    const forward = async (heart: PulledHeart): Promise<void> => {
      const outcome = await send(heart);
      const ok = outcome.ok;
      const status = outcome.status === undefined ? (target.kind === "votifier" ? (ok ? "ok" : "refused") : "---") : String(outcome.status);
      const time = new Date().toISOString().slice(11, 19);
      const detail = ok ? "" : `  ${outcome.error}`;
      if (ctx.out.json) {
        process.stdout.write(
          `${JSON.stringify({ time: new Date().toISOString(), event: label, heart_id: heart.heart_id, username: heart.username, claim: "claimed", status: outcome.status ?? null, ok, latency_ms: outcome.latencyMs, ...(ok ? {} : { error: detail.trim() }) })}\n`,
        );
      } else {
        process.stdout.write(`${time}  --> ${label}  ${heart.heart_id}  ${heart.username.padEnd(16)}  [${status}] ${outcome.latencyMs} ms${detail}\n`);
      }
      if (ok) {
        held.delete(heart.heart_id);
        forwarded++;
        return;
      }
      const failures = (held.get(heart.heart_id)?.failures ?? 0) + 1;
      held.set(heart.heart_id, { heart, failures, notBefore: Date.now() + Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** (failures - 1)) });
    };
    /** A listed heart the claim did not grant: not forwarded, and said so. */
    const reportNotGranted = (heart: PulledHeart, status: Exclude<PullClaimStatus, "claimed">) => {
      notGranted++;
      if (ctx.out.json) {
        process.stdout.write(
          `${JSON.stringify({ time: new Date().toISOString(), event: label, heart_id: heart.heart_id, username: heart.username, claim: status, ok: false, error: `not forwarded: ${NOT_GRANTED_TEXT[status]}` })}\n`,
        );
      } else {
        const time = new Date().toISOString().slice(11, 19);
        process.stdout.write(`${time}  --- ${label}  ${heart.heart_id}  ${heart.username.padEnd(16)}  not forwarded: ${NOT_GRANTED_TEXT[status]}\n`);
      }
    };
    /** Claims the hearts; each heart's answer (an id the gateway did not answer counts as `unknown`). */
    const claim = async (hearts: PulledHeart[]): Promise<Map<string, PullClaimStatus>> => {
      const statuses = new Map<string, PullClaimStatus>();
      for (let i = 0; i < hearts.length; i += MAX_PULL_CLAIM) {
        // Not aborted by Ctrl-C: a claim that reached the gateway must come back, so what it granted is forwarded.
        const answer = (await postSigned(
          gatewayUrl,
          PULL_PATHS.claims,
          pullSecret,
          { server_id: serverId, heart_ids: hearts.slice(i, i + MAX_PULL_CLAIM).map((h) => h.heart_id) },
          AbortSignal.timeout(GATEWAY_TIMEOUT_MS),
        )) as { results: Array<{ heart_id: string; status: PullClaimStatus }> };
        for (const result of answer.results) statuses.set(result.heart_id, result.status);
      }
      return statuses;
    };

    while (!stop.aborted) {
      try {
        for (const { heart, notBefore } of [...held.values()]) {
          if (stop.aborted) break;
          if (notBefore <= Date.now()) await forward(heart);
        }
        let cursor: string | null = null;
        do {
          const page = (await postSigned(
            gatewayUrl,
            PULL_PATHS.hearts,
            pullSecret,
            { server_id: serverId, limit: PAGE_LIMIT, ...(cursor ? { cursor } : {}) },
            stop,
          )) as {
            hearts: PulledHeart[];
            next_cursor: string | null;
          };
          if (gatewayDown) ctx.out.progress("The gateway answers again.");
          gatewayDown = false;
          // A held heart offered again (a redelivery) is already this run's to forward.
          const offered = page.hearts.filter((h) => !held.has(h.heart_id));
          // Claimed before it is forwarded (pay-once): only the claim's `claimed` makes the heart this run's to pay.
          const statuses = offered.length > 0 ? await claim(offered) : new Map<string, PullClaimStatus>();
          // What the claim granted is forwarded even after Ctrl-C: claimed hearts are not offered again.
          for (const heart of offered) {
            const status = statuses.get(heart.heart_id) ?? "unknown";
            if (status === "claimed") await forward(heart);
            else reportNotGranted(heart, status);
          }
          cursor = page.next_cursor;
        } while (cursor && !stop.aborted);
      } catch (error) {
        if (stop.aborted) break;
        // Failure policy: a refusal (secret, pull off, unknown server) ends the command; an outage is reported once and polled through.
        if (error instanceof PullRefused) {
          throw new CliError(`the gateway refused the pull request (${error.message})`, {
            hint: "check --server and the pull secret (rotated? `servers create` printed it), and that the pull API is on",
          });
        }
        if (!gatewayDown) ctx.out.progress(`The gateway at ${gatewayUrl} does not answer (${(error as Error).message}); retrying...`);
        gatewayDown = true;
      }
      await sleep(intervalMs, stop);
    }
    if (held.size > 0) {
      ctx.out.progress(
        `${held.size} claimed heart${held.size === 1 ? " was" : "s were"} not accepted by ${forwardTo} and ${held.size === 1 ? "is" : "are"} no longer offered by the pull API: ${[...held.keys()].join(", ")}. "Redeliver" on the dashboard's deliveries offers one again.`,
      );
    }
    const skipped = notGranted === 0 ? "" : ` ${notGranted} not forwarded: the claim did not grant ${notGranted === 1 ? "it" : "them"}.`;
    ctx.out.progress(`Stopped. ${forwarded} heart${forwarded === 1 ? "" : "s"} forwarded.${skipped}`);
    return EXIT_OK;
  },
};
