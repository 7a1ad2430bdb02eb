import type { PrismaClient } from "../shared/adapters/db.js";
import type { Mailer } from "../shared/adapters/mailer.js";
import { executeSql, runSql, runSqlTransaction } from "../shared/adapters/sql/executor.js";
import { fenceIndexLedPlans } from "../shared/adapters/sql/planner-fence.js";
import type { Logger } from "../shared/runtime/log.js";
import type { SecretBox } from "../shared/runtime/secrets.js";
import { digestDiscordMessage, digestMail } from "./alert-digest.js";
import {
  claimDigestSql,
  dueOwnersSql,
  finishDigestSql,
  markChannelSentSql,
  readChannelsSql,
  retryDigestSql,
  type DigestAlert,
  type StoredChannels,
} from "./alert-store.js";

/** ALERT_DIGEST_WINDOW_SECONDS' default: alerts of one owner that fire within this window go out as one digest. */
export const DEFAULT_ALERT_DIGEST_WINDOW_SECONDS = 300;
/** Owners one sender pass looks at, at most (send_after index entries read). */
export const DIGEST_OWNERS_PER_PASS = 50;
/** Alerts one digest carries at most; a larger storm goes out as the next digest. */
export const ALERTS_PER_DIGEST = 1_000;
/** How long a taken digest is kept from other senders while it is sent. */
export const DIGEST_LEASE_MS = 2 * 60_000;
/** Temporary failures of one digest before its alerts are given up on that channel. */
export const MAX_DIGEST_ATTEMPTS = 8;
/** The first retry's wait; each further one doubles it. */
export const DIGEST_RETRY_STEP_MS = 60_000;

/** What a post to a Discord webhook did (the Discord REST client's answer, as the sender acts on it). */
export type WebhookPostResult = { kind: "ok" } | { kind: "permanent" | "temporary"; reason: string };

/** Posts one message to a Discord webhook URL (through the project's one Discord REST client). */
export type PostDiscordWebhook = (webhookUrl: string, message: object) => Promise<WebhookPostResult>;

/** What a digest pass needs. */
export interface AlertDigestDeps {
  db: PrismaClient;
  /** Without a mailer (no SMTP_URL) the e-mail channel is off. */
  mailer: Mailer | undefined;
  /** Without it the Discord channel is off. */
  postDiscordWebhook: PostDiscordWebhook | undefined;
  secretBox: SecretBox;
  /** Where the dashboard links point (LOGIN_LINK_BASE_URL: the gateway as owners' browsers reach it). */
  dashboardBaseUrl: string;
  /** ALERT_DIGEST_WINDOW_SECONDS. */
  windowSeconds: number;
  log: Logger;
}

/** What one pass did. */
export interface AlertDigestPassResult {
  /** Owners whose digest was taken. */
  digests: number;
  mailed: number;
  posted: number;
  retried: number;
}

type ChannelOutcome = "sent" | "given_up" | "temporary" | "off";

/** A digest's claim transaction: the fence and one claim of at most ALERTS_PER_DIGEST rows. */
const CLAIM_TRANSACTION = { timeoutMs: 10_000, maxWaitMs: 5_000 };

/**
 * One digest pass at `now`: owners with an alert that has waited the digest window (at most DIGEST_OWNERS_PER_PASS),
 * and for each, every alert of theirs waiting (at most ALERTS_PER_DIGEST, taken under a lease) as ONE e-mail and ONE
 * Discord message on the channels they chose. A channel that took the digest is marked on each alert, so no alert is
 * sent twice on a channel; a temporary failure retries the channels that have not taken it (doubling waits, given up
 * after MAX_DIGEST_ATTEMPTS); a permanent one (a bounce, a deleted webhook) is logged and given up. Neither the
 * address nor the webhook URL reaches a log line.
 */
export async function runAlertDigestPass(deps: AlertDigestDeps, now: Date): Promise<AlertDigestPassResult> {
  const result: AlertDigestPassResult = { digests: 0, mailed: 0, posted: 0, retried: 0 };
  const cutoff = new Date(now.getTime() - deps.windowSeconds * 1000);
  const owners = await runSql<{ owner_id: string }>(deps.db, dueOwnersSql(cutoff, DIGEST_OWNERS_PER_PASS));
  for (const { owner_id: ownerId } of owners) {
    // Fenced (claimDigestSql says why): the fence and the claim in one short transaction.
    const alerts = await runSqlTransaction(
      deps.db,
      async (tx) =>
        tx.query<DigestAlert>(claimDigestSql(ownerId, now, new Date(now.getTime() + DIGEST_LEASE_MS), ALERTS_PER_DIGEST, await fenceIndexLedPlans(tx))),
      CLAIM_TRANSACTION,
    );
    if (alerts.length === 0) continue;
    result.digests += 1;
    const [channels] = await runSql<StoredChannels>(deps.db, readChannelsSql(ownerId));
    const email = await sendMail(deps, ownerId, channels?.email ?? null, alerts);
    const discord = await postDiscord(deps, ownerId, channels?.discord_webhook ?? null, alerts);
    if (email === "sent") result.mailed += 1;
    if (discord === "sent") result.posted += 1;
    const attempts = Math.max(...alerts.map((a) => a.attempts));
    if ((email === "temporary" || discord === "temporary") && attempts + 1 < MAX_DIGEST_ATTEMPTS) {
      result.retried += 1;
      await executeSql(
        deps.db,
        retryDigestSql(
          alerts.map((a) => a.id),
          new Date(now.getTime() + DIGEST_RETRY_STEP_MS * 2 ** attempts),
        ),
      );
    } else {
      // Failure policy: after MAX_DIGEST_ATTEMPTS temporary failures the digest is given up; the alerts stay on the dashboard.
      if (email === "temporary" || discord === "temporary")
        deps.log.warn({ owner: ownerId, alerts: alerts.length }, "alert digest given up after repeated temporary failures");
      await executeSql(deps.db, finishDigestSql(alerts.map((a) => a.id)));
    }
  }
  return result;
}

/** What a channel's send came to, as the digest acts on it. */
type ChannelSend = { ok: true } | { ok: false; kind: "permanent" | "temporary"; reason: string };

/**
 * Sends the alerts this channel has not carried yet as one digest message (`send`, null when the channel is off for
 * this owner); marks them carried on success, and on a permanent refusal (given up). The log names the owner and the
 * reason only, never the address or the webhook URL.
 */
async function sendOnChannel(
  deps: AlertDigestDeps,
  ownerId: string,
  channel: "email" | "discord",
  alerts: readonly DigestAlert[],
  send: ((lines: readonly DigestAlert[]) => Promise<ChannelSend>) | null,
): Promise<ChannelOutcome> {
  const pending = alerts.filter((a) => !(channel === "email" ? a.email_sent : a.discord_sent));
  if (send === null || pending.length === 0) return "off";
  const sent = await send(pending);
  const mark = () =>
    executeSql(
      deps.db,
      markChannelSentSql(
        pending.map((a) => a.id),
        channel,
      ),
    );
  if (sent.ok) {
    await mark();
    return "sent";
  }
  deps.log.warn({ owner: ownerId, channel, reason: sent.reason, kind: sent.kind }, "alert digest not sent on a channel");
  if (sent.kind === "temporary") return "temporary";
  // Failure policy: a permanent refusal (a bounce, a webhook Discord refuses for good) is not retried; the dashboard still lists the alerts.
  await mark();
  return "given_up";
}

function sendMail(deps: AlertDigestDeps, ownerId: string, address: string | null, alerts: readonly DigestAlert[]): Promise<ChannelOutcome> {
  const mailer = deps.mailer;
  const send =
    mailer === undefined || address === null
      ? null
      : (lines: readonly DigestAlert[]) => mailer.send(digestMail({ to: address, lines, dashboardBaseUrl: deps.dashboardBaseUrl }));
  return sendOnChannel(deps, ownerId, "email", alerts, send);
}

function postDiscord(deps: AlertDigestDeps, ownerId: string, sealed: string | null, alerts: readonly DigestAlert[]): Promise<ChannelOutcome> {
  const post = deps.postDiscordWebhook;
  const send =
    post === undefined || sealed === null
      ? null
      : async (lines: readonly DigestAlert[]): Promise<ChannelSend> => {
          const posted = await post(deps.secretBox.open(sealed), digestDiscordMessage({ lines, dashboardBaseUrl: deps.dashboardBaseUrl }));
          return posted.kind === "ok" ? { ok: true } : { ok: false, kind: posted.kind, reason: posted.reason };
        };
  return sendOnChannel(deps, ownerId, "discord", alerts, send);
}
