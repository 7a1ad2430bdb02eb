import { Code, ConnectError } from "@connectrpc/connect";
import { REMINDER_CONFIRM_PREFIX, REMINDER_OPT_IN_SUFFIX, REMINDER_UNSUBSCRIBE_PREFIX, RECEIPT_PATH_PREFIX } from "../services/shared/values/wire.js";
import { fromRpcError, type RawReply } from "./http-errors.js";
import { escapeHtml } from "./markdown.js";
import { REMINDER_PAGE_HEADERS, reminderPage } from "./receipt-page.js";

/**
 * The public pages of vote reminders (docs/reminders.md): the receipt page's opt-in form posts to
 * `POST /receipts/<token>/reminder`; the confirm and unsubscribe links open a page with a button (`GET` never changes
 * anything: mail scanners fetch links) that posts to the same URL; a mail client's RFC 8058 one-click POST to the
 * unsubscribe URL unsubscribes with no page. A token that names nothing is 404, a bad address 400 with a clear text.
 * The address is never logged: the log line carries the route's name, never the path or the form.
 */

/** The route names in logs and metrics (the paths hold tokens). */
export const REMINDER_OPT_IN_ROUTE_NAME = `${RECEIPT_PATH_PREFIX}:token${REMINDER_OPT_IN_SUFFIX}`;
export const REMINDER_CONFIRM_ROUTE_NAME = `${REMINDER_CONFIRM_PREFIX}:token`;
export const REMINDER_UNSUBSCRIBE_ROUTE_NAME = `${REMINDER_UNSUBSCRIBE_PREFIX}:token`;
/** The page text of a link or token that names nothing (404). */
export const REMINDER_NOT_FOUND_TEXT = "This link is not valid. Check that it was copied completely.";
/** The page text of an opt-in form sent without an address (400). */
export const NO_EMAIL_TEXT = "Enter your e-mail address.";
/** The page text of a failure to try again (503 with Retry-After, or 500). */
export const TRY_AGAIN_TEXT = "This cannot be done right now. Please try again in a minute.";
/** Longer segments are no token: 404 without asking the referral service. */
const MAX_SEGMENT_CHARS = 128;

/** The RPCs the pages need; in production the bound Connect client methods. */
export interface ReminderRpcs {
  subscribeReminder(request: { receiptToken: string; email: string }): Promise<{ serverName: string }>;
  confirmReminder(request: { token: string }): Promise<{ serverName: string }>;
  unsubscribeReminder(request: { token: string }): Promise<{ serverName: string }>;
  subscribeDiscordReminder(request: { receiptToken: string }): Promise<{ serverName: string }>;
}

/** The answer plus log fields. */
export interface ReminderResult {
  reply: RawReply;
  outcome: string;
  cause?: unknown;
}

function page(status: number, title: string, bodyHtml: string, outcome: string, cause?: unknown): ReminderResult {
  const reply = { status, headers: { ...REMINDER_PAGE_HEADERS }, body: reminderPage(title, bodyHtml) };
  return cause === undefined ? { reply, outcome } : { reply, outcome, cause };
}

const notFound = () => page(404, "Link not found", `<p>${REMINDER_NOT_FOUND_TEXT}</p>`, "not_found");

/** An RPC failure as a page: NotFound 404, a refused input 400 with the service's text, else the public table (503/500). */
function failed(error: unknown): ReminderResult {
  if (error instanceof ConnectError && error.code === Code.NotFound) return notFound();
  if (error instanceof ConnectError && (error.code === Code.InvalidArgument || error.code === Code.FailedPrecondition)) {
    return page(400, "Not done", `<p>${escapeHtml(error.rawMessage)}</p>`, "bad_request");
  }
  const mapped = fromRpcError(error);
  const outcome = mapped.reply.status === 503 ? "service_unavailable" : "internal_error";
  const result = page(mapped.reply.status, "Try again", `<p>${TRY_AGAIN_TEXT}</p>`, outcome, mapped.cause ?? error);
  // The public table's headers (Retry-After) go with the page.
  Object.assign(result.reply.headers, mapped.reply.headers);
  return result;
}

/** The token of `<prefix><token><suffix>`, or undefined when the path holds none. */
function tokenOf(rawPath: string, prefix: string, suffix = ""): string | undefined {
  if (!rawPath.startsWith(prefix) || !rawPath.endsWith(suffix)) return undefined;
  const token = rawPath.slice(prefix.length, rawPath.length - suffix.length);
  return token === "" || token.length > MAX_SEGMENT_CHARS || token.includes("/") ? undefined : token;
}

/**
 * `POST /receipts/<token>/reminder` with the form field `email`: a pending subscription and its confirm mail; with
 * `channel=discord` instead: an active Discord DM reminder to the heart's Discord account (no confirm step).
 */
export async function handleReminderOptIn(rawPath: string, body: Buffer, rpcs: ReminderRpcs): Promise<ReminderResult> {
  const token = tokenOf(rawPath, RECEIPT_PATH_PREFIX, REMINDER_OPT_IN_SUFFIX);
  if (token === undefined) return notFound();
  const form = new URLSearchParams(body.toString("utf8"));
  if (form.get("channel") === "discord") {
    try {
      const { serverName } = await rpcs.subscribeDiscordReminder({ receiptToken: token });
      return page(200, "Reminders on", `<p>You will get a Discord DM when you can vote for ${escapeHtml(serverName)} again.</p>`, "discord_active");
    } catch (error) {
      // Failure policy: every refusal is a page (404 unknown token, 400 no bot or no Discord account, 503 try again).
      return failed(error);
    }
  }
  const email = form.get("email");
  if (email === null || email.trim() === "") return page(400, "Not done", `<p>${NO_EMAIL_TEXT}</p>`, "bad_request");
  try {
    const { serverName } = await rpcs.subscribeReminder({ receiptToken: token, email });
    return page(
      200,
      "Check your inbox",
      `<p>We sent a link to confirm reminders for ${escapeHtml(serverName)}. Nothing is sent until you confirm.</p>`,
      "pending",
    );
  } catch (error) {
    // Failure policy: every refusal is a page (404 unknown token, 400 bad address, 503 try again); the cause is logged, never the address.
    return failed(error);
  }
}

/** `GET` of a confirm or unsubscribe link: a page with a button that posts to the same URL (a GET changes nothing). */
export function handleReminderLinkPage(rawPath: string): ReminderResult {
  const confirm = tokenOf(rawPath, REMINDER_CONFIRM_PREFIX);
  const unsubscribe = tokenOf(rawPath, REMINDER_UNSUBSCRIBE_PREFIX);
  if (confirm === undefined && unsubscribe === undefined) return notFound();
  const [title, text, button] =
    confirm !== undefined
      ? ["Confirm vote reminders", "Press the button to get an e-mail when you can vote again.", "Confirm reminders"]
      : ["Stop vote reminders", "Press the button to get no more vote reminders.", "Unsubscribe"];
  const form = `<form method="post" action="${escapeHtml(rawPath)}"><button type="submit">${button}</button></form>`;
  return page(200, title, `<p>${text}</p>${form}`, "link_page");
}

/** `POST /reminders/confirm/<token>`: the subscription becomes active. */
export async function handleReminderConfirm(rawPath: string, rpcs: ReminderRpcs): Promise<ReminderResult> {
  const token = tokenOf(rawPath, REMINDER_CONFIRM_PREFIX);
  if (token === undefined) return notFound();
  try {
    const { serverName } = await rpcs.confirmReminder({ token });
    return page(200, "Reminders on", `<p>You will get an e-mail when you can vote for ${escapeHtml(serverName)} again.</p>`, "confirmed");
  } catch (error) {
    // Failure policy: an unknown or used token is 404; anything else the public table's answer, the cause logged.
    return failed(error);
  }
}

/** `POST /reminders/unsubscribe/<token>` (the page's button, or RFC 8058 one click): no more reminders. */
export async function handleReminderUnsubscribe(rawPath: string, rpcs: ReminderRpcs): Promise<ReminderResult> {
  const token = tokenOf(rawPath, REMINDER_UNSUBSCRIBE_PREFIX);
  if (token === undefined) return notFound();
  try {
    const { serverName } = await rpcs.unsubscribeReminder({ token });
    return page(200, "Unsubscribed", `<p>No more vote reminders for ${escapeHtml(serverName)}.</p>`, "unsubscribed");
  } catch (error) {
    // Failure policy: an unknown token is 404; anything else the public table's answer, the cause logged.
    return failed(error);
  }
}
