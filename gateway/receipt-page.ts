import { escapeHtml, htmlPage, pageHeadersFor } from "./markdown.js";

/** A receipt as the gateway publishes it (`GET /receipts/<token>.json`; gateway/openapi.ts `Receipt`). */
export interface ReceiptJson {
  server_name: string;
  username: string;
  cast_at: string;
  counted: boolean;
  /**
   * `counted`, `cooldown` (voted again within 24 hours; `next_vote_at` says when), `not_counted` (no reason given) or
   * `erased` (the voter's data was erased at their request: the receipt shows nothing more of the heart).
   */
  outcome: "counted" | "cooldown" | "not_counted" | "erased";
  next_vote_at: string | null;
  period: string;
  deliveries: Array<{ transport: string; status: "delivered" | "waiting" | "failed"; delivered_at: string | null }>;
  /** The heart's place in the server's claim ledger (claimed in game); null when it is not in the ledger. */
  claim: {
    state: "held" | "claimed" | "expired" | "withdrawn";
    held_until: string | null;
    claimed_at: string | null;
    expired_at: string | null;
  } | null;
  /** Pay-once servers, once paid: the transport that paid the heart (`claim`, `pull`, `callback` or `votifier`); absent otherwise. */
  paid_by?: string;
  /** With `paid_by`: when it paid. */
  paid_at?: string;
}

/** The receipt page's one stylesheet (mobile first; allowed by its hash in the page's CSP, no other style or script). */
const RECEIPT_STYLE = [
  "*{box-sizing:border-box}",
  "body{font:16px/1.5 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;padding:1rem;color:#1b1f24;background:#f4f6f8}",
  "main{max-width:34rem;margin:0 auto;background:#fff;border:1px solid #d8dee4;border-radius:12px;padding:1.25rem}",
  ".kicker{margin:0;font-size:.85rem;letter-spacing:.04em;text-transform:uppercase;color:#57606a}",
  "h1{font-size:1.35rem;line-height:1.3;margin:.25rem 0 1rem;overflow-wrap:anywhere}",
  "h2{font-size:1.05rem;margin:1.5rem 0 .5rem}",
  ".verdict{margin:0 0 1rem;padding:.75rem 1rem;border-radius:8px;font-weight:600;overflow-wrap:anywhere}",
  ".verdict small{display:block;font-weight:400;margin-top:.2rem}",
  ".counted{background:#dafbe1;color:#0f5323}.cooldown{background:#fff8c5;color:#5c4400}.not_counted{background:#eaeef2;color:#24292f}",
  "dl{margin:0;display:grid;grid-template-columns:max-content 1fr;gap:.35rem 1rem}",
  "dt{color:#57606a}dd{margin:0;overflow-wrap:anywhere}",
  "ul{list-style:none;margin:0;padding:0}",
  "li{border-top:1px solid #d8dee4;padding:.6rem 0}",
  ".way{display:block;font-weight:600}",
  ".badge{display:inline-block;border-radius:999px;padding:.05rem .55rem;font-size:.85rem;font-weight:600;margin-right:.35rem}",
  ".delivered{background:#dafbe1;color:#0f5323}.waiting{background:#fff8c5;color:#5c4400}.failed{background:#ffebe9;color:#82071e}",
  ".note{color:#57606a;font-size:.9rem;margin:1.25rem 0 0}",
  "a{color:#0b57d0}",
  "@media (min-width:40rem){body{padding:3rem 1rem}main{padding:2rem}h1{font-size:1.6rem}}",
].join("\n");

/**
 * Headers of EVERY answer on a receipt URL (page or JSON, found or not, a 405 to another method too): the URL
 * holds the voter's token, so the answer is never stored by a cache or indexed, and a link followed from it
 * never carries the URL on as a `Referer`.
 */
export const RECEIPT_ANSWER_HEADERS: Readonly<Record<string, string>> = {
  "cache-control": "no-store",
  "x-robots-tag": "noindex",
  "referrer-policy": "no-referrer",
};

/** Headers of every receipt page (found or not): the strict CSP, and the headers of every receipt answer. */
export const RECEIPT_PAGE_HEADERS: Readonly<Record<string, string>> = {
  ...pageHeadersFor(RECEIPT_STYLE),
  ...RECEIPT_ANSWER_HEADERS,
};

/** Headers of the pages that post a form (the receipt page with its reminder form, the reminder pages): forms may post to the gateway only. */
export const REMINDER_PAGE_HEADERS: Readonly<Record<string, string>> = {
  ...RECEIPT_PAGE_HEADERS,
  "content-security-policy": (RECEIPT_PAGE_HEADERS["content-security-policy"] ?? "").replace("form-action 'none'", "form-action 'self'"),
};

/** A vote-reminder page (gateway/handle-reminder.ts): the receipt's look, `bodyHtml` already escaped. */
export function reminderPage(title: string, bodyHtml: string): string {
  return htmlPage(title, `<main><p class="kicker">Vote reminders</p><h1>${escapeHtml(title)}</h1>${bodyHtml}</main>`, RECEIPT_STYLE);
}

/** The Discord DM opt-in: one button (nothing pre-checked); it posts `channel=discord` to the same route as the e-mail form. */
function discordReminderFormHtml(action: string): string {
  return [
    "<h2>Remind me by Discord DM when I can vote again</h2>",
    `<form method="post" action="${escapeHtml(action)}">`,
    '<input type="hidden" name="channel" value="discord">',
    '<button type="submit">Remind me by Discord DM</button>',
    '<p class="note">The list\'s bot sends you a direct message on the Discord account of this vote. Every reminder has a one-click unsubscribe link.</p>',
    "</form>",
  ].join("\n");
}

/** What the receipt page offers: the opt-in route, and which channels the list runs (e-mail, Discord DM). */
export interface ReminderOffer {
  action: string;
  email: boolean;
  /** The list runs a bot AND the heart carried a Discord user id. */
  discord: boolean;
}

/** The opt-in form: an empty address field and a button, nothing pre-checked. */
function reminderFormHtml(action: string): string {
  return [
    "<h2>Remind me by e-mail when I can vote again</h2>",
    `<form method="post" action="${escapeHtml(action)}">`,
    '<label for="email">E-mail address</label> <input id="email" name="email" type="email" required autocomplete="email" value=""> ',
    '<button type="submit">Remind me</button>',
    '<p class="note">We send a link to confirm first. Every reminder has a one-click unsubscribe link.</p>',
    "</form>",
  ].join("\n");
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** `27 Nov 2026, 11:03 UTC` in a <time> element (the page runs no script, so times are shown in UTC). */
function timeHtml(iso: string): string {
  const at = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, "0");
  const text = `${at.getUTCDate()} ${MONTHS[at.getUTCMonth()]} ${at.getUTCFullYear()}, ${pad(at.getUTCHours())}:${pad(at.getUTCMinutes())} UTC`;
  return `<time datetime="${escapeHtml(iso)}">${text}</time>`;
}

/** How the reward reaches the game server, in the voter's words. */
const TRANSPORT_TEXT: Record<string, string> = {
  callback: "Reward sent to the server's website",
  votifier: "Vote sent to the game server (Votifier)",
  pull: "Reward kept for the game server to collect",
};

/** The neutral text of each delivery state (no status code, no receiver's answer, no reason). */
function deliveryHtml(d: ReceiptJson["deliveries"][number]): string {
  const way = escapeHtml(TRANSPORT_TEXT[d.transport] ?? d.transport);
  const [badge, text] =
    d.status === "delivered"
      ? [
          '<span class="badge delivered">Delivered</span>',
          d.delivered_at ? `Received by the server at ${timeHtml(d.delivered_at)}.` : "Received by the server.",
        ]
      : d.status === "failed"
        ? ['<span class="badge failed">Not delivered</span>', "It could not be delivered to the server. Show this receipt to the server's staff."]
        : d.transport === "pull"
          ? ['<span class="badge waiting">Waiting</span>', "The server has not collected it yet."]
          : ['<span class="badge waiting">Waiting</span>', "Not delivered yet; it is retried automatically."];
  return `<li><span class="way">${way}</span>${badge} <span>${text}</span></li>`;
}

/** The claim ledger's state in the voter's words (no player id, no reason beyond the state). */
function claimHtml(claim: NonNullable<ReceiptJson["claim"]>, paidBy?: string): string {
  const at = (iso: string | null, before: string) => (iso ? ` ${before} ${timeHtml(iso)}.` : ".");
  const [badge, text] =
    claim.state === "claimed"
      ? ['<span class="badge delivered">Claimed</span>', `Claimed in game${at(claim.claimed_at, "at")}`]
      : claim.state === "held"
        ? ['<span class="badge waiting">Ready to claim</span>', `Claim it in game${at(claim.held_until, "before")}`]
        : claim.state === "expired"
          ? ['<span class="badge failed">Expired</span>', `It was not claimed in game and expired${at(claim.expired_at, "at")}`]
          : paidBy !== undefined
            ? ['<span class="badge delivered">Paid</span>', "The reward was paid to the server another way (see Paid by); there is nothing to claim in game."]
            : ['<span class="badge failed">Withdrawn</span>', "The server list withdrew this reward; there is nothing to claim."];
  return ["<h2>Reward in game</h2>", `<ul><li>${badge} <span>${text}</span></li></ul>`].join("\n");
}

function verdictHtml(r: ReceiptJson): string {
  if (r.outcome === "counted") {
    return '<p class="verdict counted">Your vote counted.<small>Below: whether the reward reached the server.</small></p>';
  }
  if (r.outcome === "cooldown") {
    const next = r.next_vote_at ? ` You can vote again from ${timeHtml(r.next_vote_at)}.` : "";
    return `<p class="verdict cooldown">Not counted: you already voted for this server in the last 24 hours.<small>${next.trim()}</small></p>`;
  }
  if (r.outcome === "erased") {
    return '<p class="verdict not_counted">The voter\'s data was erased.<small>This receipt shows nothing more of the vote.</small></p>';
  }
  return '<p class="verdict not_counted">This vote was not counted.<small>No reward is sent for it.</small></p>';
}

/** Who paid a pay-once heart, in the voter's words. */
const PAID_BY_TEXT: Record<string, string> = {
  claim: "claimed in game",
  pull: "collected by the server",
  callback: "delivered to the server",
  votifier: "Votifier vote to the server",
};

/** The receipt as an HTML page: server-rendered, no script, no external asset, readable from 375 px up. */
export function receiptPage(r: ReceiptJson, jsonHref: string, offer?: ReminderOffer): string {
  const remindable = offer !== undefined && r.next_vote_at !== null && r.outcome !== "erased";
  const rows = [
    ["Player", escapeHtml(r.username)],
    ["Voted at", timeHtml(r.cast_at)],
    ["Month", escapeHtml(r.period)],
    ...(r.outcome === "counted" && r.next_vote_at ? [["Next vote", timeHtml(r.next_vote_at)]] : []),
    ...(r.paid_by !== undefined ? [["Paid by", `${escapeHtml(PAID_BY_TEXT[r.paid_by] ?? r.paid_by)}${r.paid_at ? ` at ${timeHtml(r.paid_at)}` : ""}`]] : []),
  ];
  // A heart claimed in game only (the server has no delivery transport) has no delivery section.
  const deliveries =
    r.outcome !== "counted" || (r.deliveries.length === 0 && r.claim !== null)
      ? ""
      : [
          "<h2>Delivery to the server</h2>",
          r.deliveries.length === 0
            ? '<p class="note">Not handed to the server yet. Reload this page later to see when it is.</p>'
            : `<ul>${r.deliveries.map(deliveryHtml).join("")}</ul>`,
        ].join("\n");
  const body = [
    "<main>",
    '<p class="kicker">Vote receipt</p>',
    `<h1>${escapeHtml(r.server_name)}</h1>`,
    verdictHtml(r),
    `<dl>${rows.map(([term, value]) => `<dt>${term}</dt><dd>${value}</dd>`).join("")}</dl>`,
    deliveries,
    r.claim ? claimHtml(r.claim, r.paid_by) : "",
    // Vote reminders (only over the channels the list runs): offered on a counted or cooldown heart, which has a next vote time.
    remindable && offer.email ? reminderFormHtml(offer.action) : "",
    remindable && offer.discord ? discordReminderFormHtml(offer.action) : "",
    `<p class="note">This page shows this one vote only. Reload it for the latest state. <a href="${escapeHtml(jsonHref)}">As JSON</a></p>`,
    "</main>",
  ].join("\n");
  return htmlPage(`Vote receipt: ${r.server_name}`, body, RECEIPT_STYLE);
}

/** The page of a receipt that cannot be shown: 404 (no such receipt) or a passing failure (try again). */
export function receiptProblemPage(status: number): string {
  const [title, text] =
    status === 404
      ? ["Receipt not found", "There is no vote receipt at this address. Check that the link was copied completely."]
      : ["Receipt unavailable", "The receipt cannot be shown right now. Please try again in a moment."];
  return htmlPage(title, `<main><p class="kicker">Vote receipt</p><h1>${title}</h1><p>${text}</p></main>`, RECEIPT_STYLE);
}
