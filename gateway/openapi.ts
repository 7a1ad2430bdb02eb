import {
  ANCHOR_STATES,
  CONTRACT_ERRORS,
  ERROR_TEXT,
  REFERRAL_EVENTS,
  REVERSAL_REASONS,
  REFERRAL_STATES,
  requiredText,
  type ContractErrorKind,
  integerBetweenText,
  unixSecondsText,
} from "../services/shared/values/contract.js";
import { TOO_MANY_CLICKS_TEXT } from "./handle-referral-link.js";
import { NO_EMAIL_TEXT, REMINDER_NOT_FOUND_TEXT, TRY_AGAIN_TEXT } from "./handle-reminder.js";
import {
  BAD_EMAIL_TEXT,
  DISCORD_REMINDERS_OFF_TEXT,
  NO_DISCORD_ID_TEXT,
  REFUSED_EMAIL_TEXT,
  REMINDERS_OFF_TEXT,
} from "../services/shared/values/reminder-texts.js";
import { PLUGIN_PRESET_PATHS } from "./handle-vote-claim.js";
import { TOO_MANY_KEY_GUESSES_TEXT } from "./handle-reward-queue.js";
import {
  DEFAULT_REWARD_QUEUE_PAGE,
  MAX_ACK_IDS,
  MAX_ONLINE_NAME_CHARS,
  MAX_ONLINE_PLAYERS,
  MAX_REWARD_QUEUE_PAGE,
} from "../services/shared/values/reward-queue-limits.js";
import { MAX_BODY_BYTES } from "./raw-body.js";
import { maxCharsOf, nulText, tooLongText, type FieldName } from "../services/shared/values/field-rules.js";
import { MAX_PULL_PAGE } from "../services/shared/values/wire.js";
import { NIL_UUID } from "../services/shared/values/ids.js";
import { PERIOD_CLOSED_TOP, PROGRESSION_EVENT_TYPES, REFERRAL_EVENT_TYPES } from "../services/shared/values/event-types.js";
import { PERIOD_PATTERN } from "../services/shared/values/period.js";

/** Where the gateway publishes the document. */
export const OPENAPI_PATH = "/openapi/referral.json";

/** The fields of a `period.closed` body (services/delivery/pipeline/period-closed-event.ts), for its callback and its pull item. */
const PERIOD_CLOSED_FIELDS = {
  event: { type: "string", enum: ["period.closed"] },
  event_id: { type: "string", format: "uuid", description: "The close's id, one per server and period: claim it, and key on it." },
  server_id: { type: "string", format: "uuid" },
  kind: { type: "string", enum: ["week", "month"] },
  period: { type: "string", description: "`YYYY-MM` (a UTC month) or `YYYY-Www` (an ISO week, Monday to Sunday, UTC)." },
  starts_at: { type: "string", format: "date-time", description: "The period's first instant (UTC)." },
  ends_at: { type: "string", format: "date-time", description: "The instant after the period (UTC)." },
  standings: {
    type: "array",
    maxItems: PERIOD_CLOSED_TOP,
    description: "The top voters by counted votes; equal counts share a place (1, 2, 2, 4), who reached the count first listed first.",
    items: {
      type: "object",
      required: ["place", "username", "votes"],
      properties: { place: { type: "integer", minimum: 1 }, username: { type: "string" }, votes: { type: "integer", minimum: 1 } },
      additionalProperties: false,
    },
  },
};

/** The fields of a `goal.reached` body (services/delivery/pipeline/goal-reached-event.ts), for its callback and its pull item. */
const GOAL_REACHED_FIELDS = {
  event: { type: "string", enum: ["goal.reached"] },
  event_id: { type: "string", format: "uuid", description: "One per server and reached round: claim it, and key on it." },
  server_id: { type: "string", format: "uuid", description: "The server this event is for (one of `server_ids`)." },
  goal_id: { type: "string", format: "uuid" },
  name: { type: "string" },
  round: { type: "integer", minimum: 1, description: "The round reached: 1 the first time, then 2, 3, ..." },
  target: { type: "integer", minimum: 1, description: "Counted votes across the goal's servers that reached it." },
  payees: { type: "string", enum: ["voters", "online"] },
  server_ids: { type: "array", items: { type: "string", format: "uuid" }, description: "Every server the goal counts." },
  reached_at: { type: "string", format: "date-time", description: "When the vote that reached the target counted." },
};
const GOAL_REACHED_REQUIRED = ["event", "event_id", "server_id", "goal_id", "name", "round", "target", "payees", "server_ids", "reached_at"];

const SIGNING_DESCRIPTION = [
  "A computed HMAC-SHA256 signature, not a static key. Each game server has its own referral secret",
  "(dashboard, referrals tab); `server_id` in the body selects it.",
  "",
  "Header: `X-Service-Signature: t=<unix>,v1=sha256=<hex>[,kid=<key-id>]`",
  "",
  "1. `t` = current Unix time in seconds, written as plain decimal digits.",
  "2. Signed string = `t`, a literal `.`, then the exact raw body bytes (`<t>.<rawBody>`).",
  "3. `<hex>` = lower-case hex of `HMAC_SHA256(secret, signed string)`; the key is the secret's UTF-8 bytes.",
  "4. Optional `kid` names the secret used (for rotation); without it every active secret of the server is tried.",
  "5. Send exactly the bytes you signed: re-serialising the JSON (whitespace, key order) breaks the MAC.",
  "",
  "The MAC is checked before the clock; `t` must be within ±300 s of server time.",
  "Missing or malformed header (no `t`, non-integer `t`, no `v1`, `v1` without `sha256=`,",
  "hex of the wrong length, non-hex or upper-case) -> 400; wrong MAC or unknown `kid` -> 401",
  "`signature rejected: bad_signature`; stale `t` -> 401 `signature rejected: stale`.",
].join("\n");

const INGEST_DESCRIPTION = [
  "Reports a referral lifecycle event. The checks run in this order; the first failure decides the answer:",
  "",
  `1. Body over ${MAX_BODY_BYTES} bytes (64 KiB) -> 413 \`${ERROR_TEXT.bodyTooLarge}\`; the rest is not read.`,
  `2. Missing or malformed \`X-Service-Signature\` -> 400 \`${ERROR_TEXT.badSignatureHeader}\`.`,
  `3. Body not valid UTF-8 JSON, or not a JSON object -> 400 \`${ERROR_TEXT.invalidJson}\`.`,
  "4. `server_id` (the only field read before the MAC) missing, empty or not a string -> 400.",
  `5. Unknown server -> 404 \`${ERROR_TEXT.unknownServer}\`; referrals disabled or no active secret -> 404 \`${ERROR_TEXT.referralsDisabled}\`.`,
  `6. MAC mismatch, or unknown \`kid\` -> 401 \`${ERROR_TEXT.badSignature}\` (constant-time comparison).`,
  `7. \`t\` more than 300 s from server time -> 401 \`${ERROR_TEXT.stale}\`.`,
  "8. Other field validation -> 400 (`event` and `referee_identity` texts are fixed; others name the field).",
  '9. `test: true` -> 200 `{"ok":true,"test":true}`; no token lookup, nothing written.',
  `10. Token lookup (404 \`${ERROR_TEXT.unknownToken}\`), deduplication on \`(token, event, server_event_id)\`, then the state machine (422 on an invalid transition).`,
  "",
  "Retries: a 200 must never be retried. A 500 is safe to retry with backoff: reuse the same",
  '`server_event_id` and re-sign with a fresh `t`; an exact replay returns `{"ok":true,"duplicate":true}`.',
  "The `Content-Type` header is not enforced (the MAC covers the bytes); send `application/json`.",
].join("\n");

const PULL_DESCRIPTION = [
  "For game servers that cannot accept connections (behind NAT, no web backend): poll for counted hearts and claim them.",
  "Turn the pull API on in the dashboard's integration tab; that creates the server's pull secret (`psec_...`).",
  "Requests are signed exactly like ingest events (`X-Service-Signature`, see the security scheme), with the pull secret,",
  "and checked in the same order: size limit, signature header, JSON object body, `server_id`, server and pull switch, MAC, clock,",
  "then the fields. Only hearts counted while the pull API is on are offered. A claimed heart counts as delivered",
  "(the dashboard shows it as a `pull` delivery); claiming is idempotent, so a retried claim is safe. Key rewards on `heart_id`.",
].join("\n");

const RECEIPT_DESCRIPTION = [
  "The receipt of one heart, for the voter: the server's name, the username as typed, when it was cast, whether it",
  "counted (or, on cooldown, when to vote again), and for a counted heart where its delivery to the server stands per",
  "transport. The link comes from `CastHeartResponse.receipt_url` (internal API); its token is unguessable and names",
  "that heart only. Every answer on the URL, whatever its method or status, is never cached (`Cache-Control: no-store`)",
  "and never passes the URL on (`Referrer-Policy: no-referrer`).",
].join("\n");

const RECEIPT_TOKEN_PARAMETER = {
  name: "token",
  in: "path",
  required: true,
  description: "The receipt token: the last path segment of `receipt_url` (44 URL-safe characters).",
  schema: { type: "string", minLength: 1 },
} as const;

const NO_STORE_HEADERS = {
  "Cache-Control": { description: "`no-store`.", schema: { type: "string" } },
  "Referrer-Policy": { description: "`no-referrer`.", schema: { type: "string" } },
  "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" },
} as const;

/** An example of a contract error: its exact text from services/shared/values/contract.ts. */
const errorExample = (summary: string, kind: ContractErrorKind) => ({ summary, value: { error: CONTRACT_ERRORS[kind].text } });
/** An example of a field error, whose text the failing check writes (`<field> ...`). */
const fieldErrorExample = (summary: string, error: string) => ({ summary, value: { error } });

const jsonError = (description: string, examples: Record<string, { summary: string; value: unknown }>, schema = "ErrorResponse") => ({
  description,
  headers: { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } },
  content: { "application/json": { schema: { $ref: `#/components/schemas/${schema}` }, examples } },
});

/** An `{error}` answer that carries `Retry-After` (whole seconds). */
function retryableError(description: string, examples: Record<string, { summary: string; value: unknown }>, retryAfter: string) {
  const reply = jsonError(description, examples);
  return { ...reply, headers: { ...reply.headers, "Retry-After": { description: retryAfter, schema: { type: "integer", minimum: 1 } } } };
}

const REMINDER_DESCRIPTION = [
  "Vote reminders (docs/reminders.md): a voter asks, from their receipt page, for an e-mail (confirmed by a link) or a",
  "Discord DM when they may vote for the server again. Every answer is an HTML page for the voter (no script, strict CSP,",
  "forms post to the gateway only), never cached (`Cache-Control: no-store`) and never passing the URL on",
  "(`Referrer-Policy: no-referrer`); a body over the size limit is the JSON 413 every POST answers. A token that names",
  `nothing, or a list with neither e-mail nor Discord DM reminders on, is the 404 page ("${REMINDER_NOT_FOUND_TEXT}"). A dependency`,
  `that is down, or a second opt-in of the same voter and server within a minute, is the 503 page ("${TRY_AGAIN_TEXT}")`,
  "with Retry-After; an unexpected failure the same page with 500. The voter's address is never logged.",
].join("\n");

/** A reminder page answer (HTML) with the headers every answer on a reminder path carries. */
const reminderPage = (description: string) => ({ description, headers: NO_STORE_HEADERS, content: { "text/html": { schema: { type: "string" } } } });

/** The failure answers every reminder POST shares: the 404 page, the JSON 413, the 500 and 503 pages, the 405 of another method. */
const REMINDER_POST_FAILURES = {
  "404": reminderPage(`The token names nothing (unknown, tampered, used, or its subscription is gone), or reminders are off: "${REMINDER_NOT_FOUND_TEXT}"`),
  "405": jsonError("Another method than the path's GET and POST; `Allow` lists them.", {
    methodNotAllowed: errorExample("Another method", "methodNotAllowed"),
  }),
  "413": jsonError(`The body is over ${MAX_BODY_BYTES} bytes; the connection is closed.`, { bodyTooLarge: errorExample("Body over 64 KiB", "bodyTooLarge") }),
  "500": reminderPage(`Internal error: "${TRY_AGAIN_TEXT}"`),
  "503": {
    ...reminderPage(`A dependency is down, or this voter opted in on this server less than a minute ago: "${TRY_AGAIN_TEXT}"`),
    headers: { ...NO_STORE_HEADERS, "Retry-After": { description: "Seconds to wait before trying again.", schema: { type: "integer", minimum: 1 } } },
  },
};

/** A confirm or unsubscribe link's token: the last path segment of the link in the mail. */
const reminderTokenParameter = (link: string) => ({
  name: "token",
  in: "path",
  required: true,
  description: `The ${link} token: the last path segment of the link in the reminder mail (at most 128 characters).`,
  schema: { type: "string", minLength: 1, maxLength: 128 },
});

/**
 * The path item of a confirm or unsubscribe link: `GET` shows a page with one button (a GET changes nothing: mail
 * scanners fetch links), the button's `POST` to the same URL does it.
 */
function reminderLinkItem(link: { kind: "confirm" | "unsubscribe"; summary: string; done: string; post: string }) {
  const name = link.kind === "confirm" ? "Confirm" : "Unsubscribe";
  const parameters = [reminderTokenParameter(link.kind), { $ref: "#/components/parameters/X-Request-Id" }];
  return {
    get: {
      operationId: `getReminder${name}Page`,
      summary: `The ${link.kind} link's page: one button, nothing done yet`,
      description: REMINDER_DESCRIPTION,
      tags: ["reminders"],
      security: [],
      parameters,
      responses: {
        "200": reminderPage("A page with one button that posts to the same URL."),
        "404": reminderPage(`The token is no ${link.kind} token (empty, nested or too long), or reminders are off: "${REMINDER_NOT_FOUND_TEXT}"`),
      },
    },
    post: {
      operationId: link.kind === "confirm" ? "confirmVoteReminder" : "unsubscribeVoteReminder",
      summary: link.summary,
      description: `${REMINDER_DESCRIPTION}\n\n${link.post}`,
      tags: ["reminders"],
      security: [],
      parameters,
      requestBody: {
        required: false,
        description: "Not read (the page's button sends nothing; an RFC 8058 one-click POST sends `List-Unsubscribe=One-Click`).",
        content: { "application/x-www-form-urlencoded": { schema: { type: "object" } } },
      },
      responses: { "200": reminderPage(link.done), ...REMINDER_POST_FAILURES },
    },
  };
}

/** 429 past the failed-signature limits (gateway/failure-limiter.ts), shared by every signed endpoint. */
function tooManyFailures() {
  return retryableError(
    "Too many failed authentications (bad signature, unknown server, disabled) from this client address (or, for a server_id the gateway does not know to exist, overall), and this request was not verified by the keys the gateway holds; wait Retry-After seconds.",
    { tooManyFailures: errorExample("Failed-signature limit reached", "tooManyFailedSignatures") },
    "Seconds until the limit's window ends.",
  );
}

/** 503 beyond the referral service's capacity or while it is unreachable: nothing was written; retry (same server_event_id, fresh t) after Retry-After. */
function overloaded() {
  return retryableError(
    "Beyond the service's capacity, or the referral service or its database is unreachable; nothing was applied. Retry after Retry-After seconds with the same server_event_id and a fresh t.",
    { overloaded: errorExample("Service overloaded", "overloaded") },
    "Seconds to wait before retrying.",
  );
}

/** 503 while a dependency (the referral service, its database) is down, or beyond capacity: nothing was done; retry after Retry-After. */
function unavailable() {
  return retryableError(
    "A dependency (the referral service or its database) is down or restarting, or the service is beyond its capacity; nothing was done. Retry after Retry-After seconds.",
    { unavailable: errorExample("A dependency is down", "unavailable"), overloaded: errorExample("Service overloaded", "overloaded") },
    "Seconds to wait before retrying.",
  );
}

/** The error answers the two pull endpoints share. */
const PULL_ERRORS = {
  "400": jsonError("Malformed signature header, invalid JSON, or a missing or invalid field.", {
    malformedSignature: errorExample("Missing or malformed X-Service-Signature", "badSignatureHeader"),
    invalidJson: errorExample("Body unreadable, not JSON, or not a JSON object", "invalidJson"),
    invalidField: fieldErrorExample("A missing or invalid field names the field", integerBetweenText("limit", 1, MAX_PULL_PAGE)),
  }),
  "401": jsonError("The signature did not verify against the server's pull secrets.", {
    badSignature: errorExample("MAC mismatch or unknown kid", "badSignature"),
    stale: errorExample("t outside ±300 s of server time", "stale"),
  }),
  "404": jsonError("Unknown server, or the pull API is off (or has no active pull secret).", {
    unknownServer: errorExample("No configuration for server_id", "unknownServer"),
    pullDisabled: errorExample("Pull API off", "pullDisabled"),
  }),
  "413": jsonError(`The body is over ${MAX_BODY_BYTES} bytes; the connection is closed.`, {
    bodyTooLarge: errorExample("Body over 64 KiB", "bodyTooLarge"),
  }),
  "429": tooManyFailures(),
  "500": jsonError("Internal error; safe to retry with backoff (listing and claiming are idempotent).", {
    internal: errorExample("Internal error", "internal"),
  }),
  "503": unavailable(),
};

const VOTES_DESCRIPTION = [
  "The check/claim API of reward plugins (Rust: EasyVoteExtended and the rust-servers.net family; FiveM; PocketMine:",
  "VoteReward). The server's claim key (`vck_...`, dashboard) travels as `key=` in the query: whoever holds it may check and",
  "claim that server's votes and nothing else. GET only; plugins send no User-Agent and `Connection: close`, which is fine.",
  "",
  "The action, by the parameters the plugins send (other parameters, such as `server=` and `customid=`, are ignored):",
  "- `object=votes&element=claim` (no `action`) -> check; `action=post&object=votes&element=claim` -> claim (rust-servers.net);",
  "- `action=custom&object=plugin&element=reward` -> claim (EasyVoteExtended's default rust-servers.net claim URL);",
  "- `action=status` -> check; `action=claim` -> claim (rustservers.gg, trackyserver, bestservers, rustserverlist, FiveM).",
  "",
  "Exactly one player id: `steamid` (SteamID64, decimal), `username` (case-insensitive; `+` or `%20` for a space), `discordid`,",
  "`uuid` (Minecraft) or `accountid`.",
  "",
  "Check answers `0` not found, `1` voted and not claimed, `2` voted and claimed. Claim answers `1` claimed now (pay),",
  "`2` already claimed (do not pay), `0` nothing to claim; of two claims at once one gets `1`, the other `2`.",
  "A wrong key, an unknown action, a missing key or player id, two player ids, or a malformed id all answer `0`:",
  "a wrong key says nothing about which servers or players exist.",
  "",
  `The same answers are served at the paths of the plugins' preset list entries, so a preset works after changing only its host: ${PLUGIN_PRESET_PATHS.map(
    ({ path, json, usedBy }) => `\`${path}\`${json ? " (the JSON form)" : ""} for ${usedBy}`,
  ).join("; ")}.`,
  "",
  "Digits are exactly one byte, no newline, `text/plain`, status 200. The JSON form (`format=json`, or `/api/votes/json`) answers",
  "`{voted, claimed, status, heart_id, voted_at, claimed_at, expires_at}`; on claim, `claimed` is true only for the call that",
  "claimed (`status` `claimed_now`), so a plugin that pays on `voted && claimed` pays once.",
  "",
  "Wrong keys are limited per client address (and overall): past the limit a key the gateway has not seen answer rightly gets",
  "`0` (or the not-found JSON) with 429 and Retry-After; a key seen working is never refused.",
  "",
  "While the service or its database is down or restarting (or the service is beyond its capacity) the answer is the same",
  "`0` (or the not-found JSON) with 503 and Retry-After: nothing was claimed.",
].join("\n");

const VOTES_QUERY_PARAMETERS = [
  ["action", "`status` or `claim` (status/claim family); `post` (rust-servers.net claim); `custom` (with `object=plugin&element=reward`)."],
  ["object", "`votes` (rust-servers.net family, with `element=claim`) or `plugin` (with `element=reward`)."],
  ["element", "`claim` (with `object=votes`) or `reward` (with `object=plugin`)."],
  ["steamid", "SteamID64 in decimal."],
  ["username", "The player's name; compared case-insensitively."],
  ["discordid", "Discord user id (decimal)."],
  ["uuid", "Minecraft (Java) account UUID, with or without dashes."],
  ["accountid", "The game account id the list passed through from the vote link."],
  ["server", "Accepted and ignored (plugins of rustservers.gg send the list's server id)."],
  ["customid", "Accepted and ignored (the FiveM script sends the player's licence)."],
].map(([name, description]) => ({ name, in: "query", required: false, description, schema: { type: "string" } }));

const digitExamples = {
  notFound: { summary: "Check: not found; claim: nothing to claim (also a wrong key)", value: "0" },
  one: { summary: "Check: voted, not claimed; claim: claimed now (pay)", value: "1" },
  two: { summary: "Check: voted and claimed; claim: already claimed (do not pay)", value: "2" },
};
const jsonVoteExamples = {
  notFound: {
    summary: "Not found, nothing to claim, or a wrong key",
    value: { voted: false, claimed: false, status: "not_found", heart_id: null, voted_at: null, claimed_at: null, expires_at: null },
  },
  claimedNow: {
    summary: "Claim: this call claimed the heart (pay)",
    value: {
      voted: true,
      claimed: true,
      status: "claimed_now",
      heart_id: "3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b",
      voted_at: "2026-01-01T00:00:00.000Z",
      claimed_at: "2026-01-01T00:05:00.000Z",
      expires_at: "2026-01-31T00:00:00.000Z",
    },
  },
};

/** The check/claim API's GET (text digits and/or JSON, `json` for the JSON path). */
function votesOperation(op: { operationId: string; summary: string; json: boolean }) {
  const jsonContent = { "application/json": { schema: { $ref: "#/components/schemas/VoteClaimAnswer" }, examples: jsonVoteExamples } };
  const digitContent = { "text/plain": { schema: { $ref: "#/components/schemas/VoteClaimDigit" }, examples: digitExamples } };
  const content = op.json ? jsonContent : { ...digitContent, "application/json": { ...jsonContent["application/json"] } };
  const retryAfter = { "Retry-After": { description: "Seconds until the wrong-key limit's window ends.", schema: { type: "integer", minimum: 1 } } };
  // The not-found answer of a refused request (429, 503): `0`, or the not-found JSON.
  const notFoundContent = op.json
    ? { "application/json": { schema: { $ref: "#/components/schemas/VoteClaimAnswer" } } }
    : {
        "text/plain": { schema: { $ref: "#/components/schemas/VoteClaimDigit" } },
        "application/json": { schema: { $ref: "#/components/schemas/VoteClaimAnswer" } },
      };
  return {
    get: {
      operationId: op.operationId,
      summary: op.summary,
      description: VOTES_DESCRIPTION,
      tags: ["reward plugins"],
      security: [{ ClaimKey: [] }],
      parameters: [
        ...VOTES_QUERY_PARAMETERS,
        ...(op.json
          ? []
          : [{ name: "format", in: "query", required: false, description: "`json` answers the JSON form.", schema: { type: "string", enum: ["json"] } }]),
        { $ref: "#/components/parameters/X-Request-Id" },
      ],
      responses: {
        "200": {
          description: op.json ? "The answer as JSON." : "The answer: one digit (`text/plain`), or the JSON form with `format=json`.",
          headers: { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } },
          content,
        },
        "429": {
          description:
            "Too many wrong keys from this client address (or overall), and this key has not been seen working: the not-found answer; wait Retry-After seconds.",
          headers: { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" }, ...retryAfter },
          content: notFoundContent,
        },
        "500": jsonError("Internal error; nothing was claimed unless a later check says so. Plugins treat it as a failed request.", {
          internal: errorExample("Internal error", "internal"),
        }),
        "503": {
          description:
            "The service or its database is down or restarting, or the service is beyond its capacity: nothing was claimed; the not-found answer in the family's form, as a 429; retry after Retry-After seconds. Plugins treat it as a failed request.",
          headers: {
            "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" },
            "Retry-After": { description: "Seconds to wait before asking again.", schema: { type: "integer", minimum: 1 } },
          },
          content: notFoundContent,
        },
      },
    },
  };
}

type Examples = Record<string, { summary: string; value: unknown }>;

const REWARD_QUEUE_DESCRIPTION = [
  "The reward queue a game plugin pays from (docs/reward-queue.md): list the pending entries, run each entry's commands,",
  "then acknowledge the ids that ran. The entry id is the plugin's idempotency key: keep the ids you ran until they are",
  "acknowledged, and never run an id you already ran (an entry stays listed until acknowledged, so a plugin restarted",
  "between running and acknowledging sees the same ids again). A wrong key answers an empty queue (or nothing",
  "acknowledged), never an error; wrong keys are limited per client address (429 with Retry-After past it).",
  "Reference plugins that follow this (Rust with uMod/Oxide, FiveM, PHP, Node.js): docs/plugins/README.md.",
].join("\n");

/** The reward queue's answers every call shares: 400 (bad input), 429 (the wrong-key limit), 500, 503. */
const REWARD_QUEUE_ERRORS = {
  "429": retryableError(
    `Too many wrong keys from this client address, and this key has not been seen working: \`{"error": "${TOO_MANY_KEY_GUESSES_TEXT}"}\`; wait Retry-After seconds.`,
    {},
    "Seconds until the wrong-key limit's window ends.",
  ),
  "500": jsonError("Internal error; retry later.", { internal: errorExample("Internal error", "internal") }),
  "503": retryableError(
    "The service or its database is down or restarting; retry after Retry-After seconds.",
    { unavailable: errorExample("Unavailable", "unavailable") },
    "Seconds to wait before asking again.",
  ),
};

const queueEntryExample = {
  id: "0192f3a4-5b6c-7d8e-9f01-23456789abcd",
  reason: "vote",
  player: { name: "Steve", steam_id: null, discord_id: null, minecraft_uuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5", account_id: null },
  commands: ["give Steve diamond 1"],
  online_only: true,
  created_at: "2026-01-01T00:00:00.000Z",
};

/** A signed pull endpoint (POST, PullSignature, JSON in and out, the shared error answers). */
function pullOperation(op: {
  operationId: string;
  summary: string;
  description: string[];
  request: string;
  requestExamples: Examples;
  response: string;
  responseDescription: string;
  responseExamples: Examples;
}) {
  return {
    post: {
      operationId: op.operationId,
      summary: op.summary,
      description: [PULL_DESCRIPTION, "", ...op.description].join("\n"),
      tags: ["pull"],
      security: [{ PullSignature: [] }],
      parameters: [{ $ref: "#/components/parameters/X-Request-Id" }],
      requestBody: {
        required: true,
        content: { "application/json": { schema: { $ref: `#/components/schemas/${op.request}` }, examples: op.requestExamples } },
      },
      responses: {
        "200": {
          description: op.responseDescription,
          headers: { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } },
          content: { "application/json": { schema: { $ref: `#/components/schemas/${op.response}` }, examples: op.responseExamples } },
        },
        ...PULL_ERRORS,
      },
    },
  };
}

const nonEmptyString = (description: string) => ({ type: "string", minLength: 1, pattern: "\\S", description });
/** A non-empty string bounded by services/shared/values/field-rules.ts (NUL is refused too). */
const boundedString = (field: FieldName, description: string) => ({
  ...nonEmptyString(`${description} At most ${maxCharsOf(field)} characters; NUL is refused.`),
  maxLength: maxCharsOf(field),
});

/**
 * The OpenAPI 3.1 description of the contract, served at GET /openapi/referral.json:
 * the ingest endpoint with every response, the signature scheme, the public
 * referral link, and the reward callback under the top-level `webhooks` key.
 * The tests lint it (Redocly recommended) and validate real responses against it.
 */
/**
 * The voter's platform ids and pass-through account id, as a version-2 callback and a pull listing
 * carry them: each only when the vote gave it (omitted otherwise, never null).
 */
const PLATFORM_ID_PROPERTIES = {
  steam_id: { type: "string", pattern: "^[0-9]{17}$", description: "The voter's SteamID64 (decimal). Omitted when the vote gave none." },
  discord_id: { type: "string", pattern: "^[0-9]{17,20}$", description: "The voter's Discord user id (snowflake, decimal). Omitted when the vote gave none." },
  minecraft_uuid: {
    type: "string",
    pattern: "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
    description: "The voter's Minecraft (Java) account UUID, lower-case with dashes. Omitted when the vote gave none.",
  },
  account_id: {
    type: "string",
    minLength: 1,
    maxLength: maxCharsOf("account_id"),
    description: "An opaque game account id the list passed through from the vote link, as given. Omitted when none was passed.",
  },
} as const;

/** A counted heart's version-1 body, the example every heart callback version starts from. */
const COUNTED_HEART_EXAMPLE = {
  event: "heart.counted",
  server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
  username: "Steve_42",
  heart_id: "3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b",
  period: "2026-01",
  timestamp: 1767225600,
  streak_day: 3,
} as const;

/** A progression event's schema: its fields, then `last` (the callback's `timestamp` or the pull list's `occurred_at`). */
function progressionEventSchema(description: string, last: string, lastSchema: Record<string, string>) {
  return {
    type: "object",
    description,
    required: ["event", "event_id", "server_id", "heart_id", "username", "cast_at", last],
    properties: { ...PROGRESSION_EVENT_PROPERTIES, [last]: lastSchema },
    additionalProperties: false,
  };
}

/** The `X-Service-Event` header of a webhook whose events are `types`. */
function eventHeader(types: readonly string[]) {
  return {
    name: "X-Service-Event",
    in: "header",
    required: true,
    description: "The event type; equals the body's `event`.",
    schema: { type: "string", enum: [...types] },
  };
}

/** How the service reads a receiver's answer to any callback (every webhook below). */
const CALLBACK_ANSWERS = {
  "2XX": { description: "Acknowledged: the delivery is marked delivered and not retried." },
  default: { description: "Not acknowledged (including 400 and 401): the delivery is retried with backoff." },
} as const;

/** The fields of a progression event (docs/callbacks.md), as its callback and a pull listing carry them. */
const PROGRESSION_EVENT_PROPERTIES = {
  event: { type: "string", enum: [...PROGRESSION_EVENT_TYPES] },
  event_id: { type: "string", format: "uuid", description: "Named by the vote, the event and the rule: the same for a replayed vote; key on it." },
  server_id: { type: "string", format: "uuid" },
  heart_id: { type: "string", format: "uuid", description: "The vote that made the event (its heart.counted's `heart_id`)." },
  username: { type: "string", description: "The player as the vote named them; empty on a network goal's entry for the players online." },
  cast_at: { type: "integer", format: "int64", description: "Unix seconds when the vote counted." },
  reward_streak: { type: "integer", description: "`streak.extended`, `streak.lost`: the reward streak with this vote." },
  lost_streak: { type: "integer", description: "`streak.lost`: the length of the streak lost." },
  scope: { type: "string", enum: ["all", "month", "week"], description: "`milestone.reached`: the rule's scope." },
  count: { type: "integer", description: "`milestone.reached`: the voter's count in the scope with this vote." },
  rule_index: { type: "integer", description: "`milestone.reached`: the rule's index in the rules' `milestones`, from 0." },
  every: { type: "integer", description: "`milestone.reached`: the rule's `every`, when it has one." },
  at: { type: "integer", description: "`milestone.reached`: the rule's `at`, when it has one." },
} as const;

/** The fields of a `heart.eligible` body (services/delivery/pipeline/domain/heart-eligible.ts), for its callback and its pull item. */
const HEART_ELIGIBLE_FIELDS = {
  event: { type: "string", enum: ["heart.eligible"] },
  event_id: { type: "string", format: "uuid", description: "Named by the vote: one per counted vote, the same for a replayed vote; key on it." },
  server_id: { type: "string", format: "uuid" },
  heart_id: { type: "string", format: "uuid", description: "The counted vote (its heart.counted's `heart_id`)." },
  username: { type: "string", description: "The player as the vote named them." },
  cast_at: { type: "integer", format: "int64", description: "Unix seconds when the vote counted." },
  eligible_at: { type: "integer", format: "int64", description: "Unix seconds from when the voter may vote again (the vote's `next_eligible_at`)." },
} as const;

export const openApiDocument = {
  openapi: "3.1.0",
  info: {
    title: "Referral Event Ingest and Reward Callback Interface",
    version: "1.0.0",
    summary: "Signed referral lifecycle events in, signed reward callbacks out.",
    description: [
      "A game server's backend POSTs signed referral lifecycle events (`registered`, `qualified`, `reversed`)",
      "to `/api/referral/events`. When a player hearts (votes for) a server and the vote counts, the service",
      "POSTs a signed `heart.counted` callback to the server owner's reward callback URL (see `webhooks`).",
      "Paths carry no version segment. Unknown extra fields in ingest bodies are accepted.",
    ].join("\n"),
    license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" },
  },
  servers: [{ url: "/", description: "The deployment that serves this document." }],
  tags: [
    { name: "keys", description: "The list's published ed25519 public keys for `v1a` callback signatures." },
    { name: "referrals", description: "Referral links and signed referral lifecycle events." },
    { name: "callbacks", description: "Signed reward callbacks sent by the service to the server owner's URL." },
    { name: "pull", description: "Signed polling of counted hearts (and, opted in, referral events), for servers that cannot accept connections." },
    {
      name: "reward plugins",
      description:
        "The check/claim API of game-server reward plugins (Rust, FiveM, PocketMine) and the reward queue they pay from, keyed by the server's claim key.",
    },
    { name: "receipts", description: "A voter's receipt of one heart: counted or not, and whether it reached the server." },
    { name: "reminders", description: "A voter's vote reminders (e-mail or Discord DM): opt in from the receipt, confirm, unsubscribe." },
  ],
  paths: {
    "/api/referral/events": {
      post: {
        operationId: "reportReferralEvent",
        summary: "Report a referral lifecycle event",
        description: INGEST_DESCRIPTION,
        tags: ["referrals"],
        security: [{ ServiceSignature: [] }],
        parameters: [{ $ref: "#/components/parameters/X-Request-Id" }],
        requestBody: {
          required: true,
          description: `The exact signed bytes, at most ${MAX_BODY_BYTES} bytes.`,
          content: {
            "application/json": {
              schema: { $ref: "#/components/schemas/ReferralEvent" },
              examples: {
                registered: {
                  summary: "A referred player registered",
                  value: {
                    event: "registered",
                    token: "q3Zl5m1bWcQf0yJ8oTn2xHkR4sVdA7uE",
                    server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
                    referee_identity: "account-48213",
                    server_event_id: "reg-account-48213",
                    ts: 1767225600,
                  },
                },
                qualified: {
                  summary: "The referred player met the server's qualification rule",
                  value: {
                    event: "qualified",
                    token: "q3Zl5m1bWcQf0yJ8oTn2xHkR4sVdA7uE",
                    server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
                    server_event_id: "qual-account-48213",
                    ts: 1767312000,
                  },
                },
                reversed: {
                  summary: "The owner reversed the referral (refund, chargeback, abuse)",
                  value: {
                    event: "reversed",
                    token: "q3Zl5m1bWcQf0yJ8oTn2xHkR4sVdA7uE",
                    server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
                    server_event_id: "rev-account-48213",
                  },
                },
                test: {
                  summary: "A signed dry-run: verified, never written",
                  value: {
                    event: "registered",
                    token: "test-token",
                    server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
                    referee_identity: "test-player",
                    server_event_id: "test-1",
                    test: true,
                  },
                },
              },
            },
          },
        },
        responses: {
          "200": {
            description: "Accepted: applied, idempotent, an exact replay, a first-touch conflict, or a test dry-run. Never retry a 200.",
            headers: { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } },
            content: {
              "application/json": {
                schema: { $ref: "#/components/schemas/OkResponse" },
                examples: {
                  applied: {
                    summary: "The referral advanced (or already was in that state)",
                    value: { ok: true, referral_id: "0b9e4c52-8a51-4c43-a6f5-8e2f7a1d3c90", state: "registered" },
                  },
                  duplicate: { summary: "Exact replay of a seen (token, event, server_event_id)", value: { ok: true, duplicate: true } },
                  firstTouchConflict: {
                    summary: "Another referrer already registered this referee",
                    value: { ok: true, ignored: "first_touch_conflict" },
                  },
                  test: { summary: "A test dry-run passed every check", value: { ok: true, test: true } },
                },
              },
            },
          },
          "400": jsonError("Malformed signature header, invalid JSON, or a missing or invalid field.", {
            malformedSignature: errorExample("Missing or malformed X-Service-Signature", "badSignatureHeader"),
            invalidJson: errorExample("Body unreadable, not JSON, or not a JSON object", "invalidJson"),
            badEvent: errorExample("event outside registered|qualified|reversed", "badEvent"),
            refereeRequired: errorExample("registered without referee_identity", "refereeRequired"),
            missingField: fieldErrorExample("Any other missing or invalid field names the field", requiredText("server_event_id")),
            wrongType: fieldErrorExample("A field of the wrong JSON type", unixSecondsText("ts")),
            tooLong: fieldErrorExample("A field over its maxLength", tooLongText("token")),
            nul: fieldErrorExample("A field holding U+0000", nulText("token")),
          }),
          "401": jsonError("The signature did not verify.", {
            badSignature: errorExample("MAC mismatch or unknown kid", "badSignature"),
            stale: errorExample("t outside ±300 s of server time", "stale"),
          }),
          "404": jsonError("Unknown server, referrals not enabled, or unknown token.", {
            unknownServer: errorExample("No configuration for server_id", "unknownServer"),
            referralsDisabled: errorExample("Referrals disabled or no active secret", "referralsDisabled"),
            unknownToken: errorExample("The token has no click record for this server", "unknownToken"),
          }),
          "413": jsonError(`The body is over ${MAX_BODY_BYTES} bytes; the connection is closed.`, {
            bodyTooLarge: errorExample("Body over 64 KiB", "bodyTooLarge"),
          }),
          "429": tooManyFailures(),
          "422": jsonError(
            "The event is not valid from the referral's current state.",
            {
              qualifiedBeforeRegistered: {
                summary: "qualified before registered",
                value: { error: ERROR_TEXT.invalidTransition, from: "clicked", event: "qualified" },
              },
              afterReversal: {
                summary: "qualified on a reversed referral",
                value: { error: ERROR_TEXT.invalidTransition, from: "reversed", event: "qualified" },
              },
            },
            "TransitionErrorResponse",
          ),
          "500": jsonError("Internal error; safe to retry with backoff (same server_event_id, fresh t).", {
            internal: errorExample("Internal error", "internal"),
          }),
          "503": overloaded(),
        },
      },
    },
    "/api/pull/hearts": pullOperation({
      operationId: "listPullHearts",
      summary: "List counted hearts not yet claimed",
      description: [
        "Oldest first. Pass `next_cursor` as `cursor` to get the next page; `next_cursor` is null on the last page.",
        "Claimed hearts leave the list, so a poller may also simply list from the start after each claim.",
      ],
      request: "PullHeartsRequest",
      requestExamples: {
        first: { summary: "The first page", value: { server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f", limit: 100 } },
        next: {
          summary: "The next page",
          value: { server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f", cursor: "MjAyNi0wMS0wMVQwMDowMDowMC4wMDBafDNmMWUyZDRj" },
        },
      },
      response: "PullHeartsResponse",
      responseDescription: "A page of unclaimed counted hearts.",
      responseExamples: {
        page: {
          summary: "One heart, last page",
          value: {
            hearts: [
              {
                heart_id: "3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b",
                username: "Steve_42",
                period: "2026-01",
                counted_at: "2026-01-01T00:00:00.000Z",
                streak_day: 3,
              },
            ],
            next_cursor: null,
          },
        },
      },
    }),
    "/api/pull/claims": pullOperation({
      operationId: "claimPullHearts",
      summary: "Claim hearts by heart_id",
      description: [
        "Each `heart_id` is answered in request order: `claimed` (now delivered), `already_claimed` (a retried claim;",
        "nothing changed) or `unknown` (not a pullable heart of this server). Claim after granting the reward.",
      ],
      request: "PullClaimsRequest",
      requestExamples: {
        claim: {
          summary: "Claim two hearts",
          value: {
            server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
            heart_ids: ["3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b", "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d"],
          },
        },
      },
      response: "PullClaimsResponse",
      responseDescription: "What the claim did, per heart_id.",
      responseExamples: {
        claimed: {
          summary: "One claimed now, one claimed before",
          value: {
            results: [
              { heart_id: "3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b", status: "claimed" },
              { heart_id: "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d", status: "already_claimed" },
            ],
          },
        },
      },
    }),
    "/api/pull/events": pullOperation({
      operationId: "listPullEvents",
      summary: "List referral events not yet claimed (opted in)",
      description: [
        "The referral outcomes (`referral.registered`, `referral.qualified`, `referral.reversed`) of a server whose pull API",
        "is opted in to them (the dashboard's pull setting, `SetPullEventTypes`; default: hearts only, and this list stays empty).",
        "A list of its own, beside the hearts list, so a poller that knows only hearts is unaffected by opting in.",
        "Each event carries the fields of the signed referral callback (`ReferralOutcomeEvent`) with `occurred_at` instead of",
        "`timestamp`. Oldest first, paged like the hearts list (its own cursor). Key rewards on `event_id`, then claim it.",
      ],
      request: "PullEventsRequest",
      requestExamples: { first: { summary: "The first page", value: { server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f", limit: 100 } } },
      response: "PullEventsResponse",
      responseDescription: "A page of unclaimed referral events.",
      responseExamples: {
        page: {
          summary: "One qualified referral, last page",
          value: {
            events: [
              {
                event: "referral.qualified",
                event_id: "0b9c8d7e-6f5a-4b3c-9d2e-1f0a9b8c7d6e",
                server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
                referral_id: "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
                referrer_identity: "alice#1",
                referee_identity: "bob",
                state: "qualified",
                previous_state: "registered",
                occurred_at: "2026-01-01T00:00:00.000Z",
              },
            ],
            next_cursor: null,
          },
        },
      },
    }),
    "/api/pull/events/claims": pullOperation({
      operationId: "claimPullEvents",
      summary: "Claim referral events by event_id",
      description: [
        "Each `event_id` is answered in request order: `claimed` (now delivered), `already_claimed` (a retried claim;",
        "nothing changed) or `unknown` (not a pullable referral event of this server). Claim after granting the reward.",
      ],
      request: "PullEventClaimsRequest",
      requestExamples: {
        claim: {
          summary: "Claim one event",
          value: { server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f", event_ids: ["0b9c8d7e-6f5a-4b3c-9d2e-1f0a9b8c7d6e"] },
        },
      },
      response: "PullEventClaimsResponse",
      responseDescription: "What the claim did, per event_id.",
      responseExamples: {
        claimed: { summary: "Claimed now", value: { results: [{ event_id: "0b9c8d7e-6f5a-4b3c-9d2e-1f0a9b8c7d6e", status: "claimed" }] } },
      },
    }),
    "/api/votes": votesOperation({ operationId: "checkOrClaimVote", summary: "Check or claim a player's vote (reward plugins)", json: false }),
    "/api/votes/json": votesOperation({ operationId: "checkOrClaimVoteJson", summary: "Check or claim a player's vote, as JSON (VoteReward)", json: true }),
    "/api/rewards/queue": {
      get: {
        operationId: "listRewardQueue",
        summary: "List the server's pending reward entries (game plugins)",
        description: REWARD_QUEUE_DESCRIPTION,
        tags: ["reward plugins"],
        security: [{ ClaimKey: [] }],
        parameters: [
          {
            name: "online",
            in: "query",
            required: false,
            description: `The players on the game server now, comma-separated (or the parameter repeated; at most ${MAX_ONLINE_PLAYERS}, each at most ${MAX_ONLINE_NAME_CHARS} characters; compared case-insensitively). Given (even empty): online-only entries of players not named are withheld. Absent: the whole queue.`,
            schema: { type: "string" },
          },
          {
            name: "limit",
            in: "query",
            required: false,
            description: `Entries per list, 1 to ${MAX_REWARD_QUEUE_PAGE} (default ${DEFAULT_REWARD_QUEUE_PAGE}); a page of large entries may hold fewer.`,
            schema: { type: "integer", minimum: 1, maximum: MAX_REWARD_QUEUE_PAGE },
          },
          { $ref: "#/components/parameters/X-Request-Id" },
        ],
        responses: {
          "200": {
            description: "The oldest pending entries, and when to list again.",
            headers: { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } },
            content: {
              "application/json": {
                schema: { $ref: "#/components/schemas/RewardQueuePage" },
                examples: {
                  entries: { summary: "One entry to run", value: { entries: [queueEntryExample], next_check: 10 } },
                  empty: { summary: "Nothing pending (also a wrong key)", value: { entries: [], next_check: 120 } },
                },
              },
            },
          },
          "400": jsonError("Bad input: the missing key, a bad limit, too many or too long online names.", {
            limit: fieldErrorExample("A bad limit", `limit: must be a whole number from 1 to ${MAX_REWARD_QUEUE_PAGE}`),
          }),
          ...REWARD_QUEUE_ERRORS,
        },
      },
    },
    "/api/rewards/queue/ack": {
      post: {
        operationId: "ackRewardEntries",
        summary: "Acknowledge the reward entries the plugin ran",
        description: `${REWARD_QUEUE_DESCRIPTION}\n\nPartial acknowledgements are fine; an id acknowledged before is reported in \`acked\` again (idempotent); an id that is no entry of this server is reported in \`unknown\`.`,
        tags: ["reward plugins"],
        security: [{ ClaimKey: [] }],
        parameters: [{ $ref: "#/components/parameters/X-Request-Id" }],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: { $ref: "#/components/schemas/RewardQueueAckRequest" },
              examples: { ack: { summary: "Acknowledge one entry", value: { ids: [queueEntryExample.id] } } },
            },
          },
        },
        responses: {
          "200": {
            description: "Which ids are acknowledged, and which are no entry of this server.",
            headers: { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } },
            content: {
              "application/json": {
                schema: { $ref: "#/components/schemas/RewardQueueAckAnswer" },
                examples: { acked: { summary: "Acknowledged", value: { acked: [queueEntryExample.id], unknown: [] } } },
              },
            },
          },
          "400": jsonError('Bad input: the missing key, a body that is not {"ids": [...]}, too many ids, a malformed id.', {
            malformed: fieldErrorExample("A malformed id", "ids[0]: not an entry id (a uuid)"),
            tooMany: fieldErrorExample("Too many ids", `ids: at most ${MAX_ACK_IDS} per acknowledgement`),
          }),
          "413": jsonError("Body too large.", { tooLarge: errorExample("Body too large", "bodyTooLarge") }),
          ...REWARD_QUEUE_ERRORS,
        },
      },
    },
    "/.well-known/webhook-keys.json": {
      get: {
        operationId: "getWebhookKeys",
        summary: "The list's public keys for v1a callback signatures",
        description: [
          "Standard Webhooks' asymmetric scheme: a callback of a server opted in to public-key signatures carries",
          '`v1a,<base64 ed25519 signature>` in `webhook-signature`, over `"<webhook-id>.<webhook-timestamp>.<rawBody>"`.',
          "The header names no key: verify with each key listed here until one verifies; when none does, fetch this",
          "document again once (a rotation may be newer than your copy) before rejecting. The current key has `expires_at`",
          "null; after a rotation the previous key stays listed for 7 days with its `expires_at`. Public material only.",
        ].join("\n"),
        tags: ["keys"],
        security: [],
        responses: {
          "200": {
            description: "The published keys, the signing key first.",
            headers: { "Cache-Control": { description: "`public, max-age=300`.", schema: { type: "string" } } },
            content: {
              "application/json": {
                schema: { $ref: "#/components/schemas/WebhookKeys" },
                examples: {
                  keys: {
                    summary: "One signing key",
                    value: {
                      keys: [
                        {
                          kid: "wk_3f9a1c2b",
                          alg: "Ed25519",
                          public_key: "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
                          created_at: "2026-11-26T03:00:00.000Z",
                          expires_at: null,
                        },
                      ],
                    },
                  },
                },
              },
            },
          },
          "405": jsonError("Only GET.", { methodNotAllowed: errorExample("Another method", "methodNotAllowed") }),
          "500": jsonError("Internal error.", { internal: errorExample("Internal error", "internal") }),
        },
      },
    },
    "/.well-known/jwks.json": {
      get: {
        operationId: "getWebhookJwks",
        summary: "The same keys as a JSON Web Key Set (OKP, Ed25519)",
        description: "RFC 7517 / RFC 8037: `x` is the raw public key, base64url. For JOSE libraries; the keys and their order equal webhook-keys.json's.",
        tags: ["keys"],
        security: [],
        responses: {
          "200": {
            description: "The published keys as a JWKS.",
            headers: { "Cache-Control": { description: "`public, max-age=300`.", schema: { type: "string" } } },
            content: {
              "application/json": {
                schema: { $ref: "#/components/schemas/Jwks" },
                examples: {
                  jwks: {
                    summary: "One signing key",
                    value: {
                      keys: [{ kty: "OKP", crv: "Ed25519", alg: "EdDSA", use: "sig", kid: "wk_3f9a1c2b", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" }],
                    },
                  },
                },
              },
            },
          },
          "405": jsonError("Only GET.", { methodNotAllowed: errorExample("Another method", "methodNotAllowed") }),
          "500": jsonError("Internal error.", { internal: errorExample("Internal error", "internal") }),
        },
      },
    },
    "/receipts/{token}": {
      get: {
        operationId: "getReceiptPage",
        summary: "A heart's receipt, as a page for the voter",
        description: RECEIPT_DESCRIPTION,
        tags: ["receipts"],
        security: [],
        parameters: [RECEIPT_TOKEN_PARAMETER, { $ref: "#/components/parameters/X-Request-Id" }],
        responses: {
          "200": {
            description: "The receipt page (HTML, no script, strict CSP).",
            headers: NO_STORE_HEADERS,
            content: { "text/html": { schema: { type: "string" } } },
          },
          "404": {
            description: "No receipt at this address (the same page whatever was wrong with the token).",
            headers: NO_STORE_HEADERS,
            content: { "text/html": { schema: { type: "string" } } },
          },
          "500": { description: "Internal error; try again.", headers: NO_STORE_HEADERS, content: { "text/html": { schema: { type: "string" } } } },
          "503": {
            description: "The referral service is unreachable; try again.",
            headers: NO_STORE_HEADERS,
            content: { "text/html": { schema: { type: "string" } } },
          },
        },
      },
    },
    "/receipts/{token}.json": {
      get: {
        operationId: "getReceipt",
        summary: "A heart's receipt, as JSON",
        description: `${RECEIPT_DESCRIPTION}\n\nThe same receipt as the page, for a list that shows it in its own design.`,
        tags: ["receipts"],
        security: [],
        parameters: [RECEIPT_TOKEN_PARAMETER, { $ref: "#/components/parameters/X-Request-Id" }],
        responses: {
          "200": {
            description: "The receipt.",
            headers: NO_STORE_HEADERS,
            content: {
              "application/json": {
                schema: { $ref: "#/components/schemas/Receipt" },
                examples: {
                  counted: {
                    summary: "Counted and delivered by callback",
                    value: {
                      server_name: "Emerald Isle Survival",
                      username: "Herobrine",
                      cast_at: "2026-11-27T11:03:12.345Z",
                      counted: true,
                      outcome: "counted",
                      next_vote_at: "2026-11-28T11:03:12.345Z",
                      period: "2026-11",
                      deliveries: [{ transport: "callback", status: "delivered", delivered_at: "2026-11-27T11:03:12.901Z" }],
                      claim: { state: "claimed", held_until: "2026-12-27T11:03:12.345Z", claimed_at: "2026-11-27T11:05:40.002Z", expired_at: null },
                    },
                  },
                  cooldown: {
                    summary: "Not counted: voted again within 24 hours",
                    value: {
                      server_name: "Emerald Isle Survival",
                      username: "Herobrine",
                      cast_at: "2026-11-27T15:00:00.000Z",
                      counted: false,
                      outcome: "cooldown",
                      next_vote_at: "2026-11-28T11:03:12.345Z",
                      period: "2026-11",
                      deliveries: [],
                      claim: null,
                    },
                  },
                },
              },
            },
          },
          "404": jsonError("No receipt at this address (the same answer whatever was wrong with the token).", {
            notFound: errorExample("Unknown, tampered or truncated token", "notFound"),
          }),
          "500": jsonError("Internal error.", { internal: errorExample("Internal error", "internal") }),
          "503": unavailable(),
        },
      },
    },
    "/receipts/{token}/reminder": {
      post: {
        operationId: "optInVoteReminder",
        summary: "Ask for vote reminders from a receipt (e-mail, or Discord DM)",
        description: [
          REMINDER_DESCRIPTION,
          "",
          "The receipt page's form. With `email`: the (server, voter)'s one subscription becomes pending with that address and a",
          "confirm link is mailed; nothing is sent until it is confirmed. With `channel=discord` instead: a Discord DM reminder to",
          "the heart's Discord account, active at once (no confirm step). The receipt token is the credential.",
        ].join("\n"),
        tags: ["reminders"],
        security: [],
        parameters: [RECEIPT_TOKEN_PARAMETER, { $ref: "#/components/parameters/X-Request-Id" }],
        requestBody: {
          required: true,
          content: {
            "application/x-www-form-urlencoded": {
              schema: {
                type: "object",
                properties: {
                  email: { type: "string", description: "One plain e-mail address (no lists, no names). Read only when `channel` is not `discord`." },
                  channel: { type: "string", enum: ["discord"], description: "`discord`: a Discord DM reminder instead of an e-mail one." },
                },
              },
              examples: {
                email: { summary: "An e-mail reminder", value: { email: "name@example.com" } },
                discord: { summary: "A Discord DM reminder", value: { channel: "discord" } },
              },
            },
          },
        },
        responses: {
          "200": reminderPage(
            'E-mail: "Check your inbox" (the confirm link was mailed; nothing is sent until it is confirmed). Discord: "Reminders on" (a DM when the voter may vote again).',
          ),
          "400": reminderPage(
            [
              "Not done; the page says why, in one of these texts:",
              `"${NO_EMAIL_TEXT}" (no \`email\`), "${BAD_EMAIL_TEXT}", "${REFUSED_EMAIL_TEXT}" (the mail server refused the confirm mail for good),`,
              `"${REMINDERS_OFF_TEXT}", "${DISCORD_REMINDERS_OFF_TEXT}", "${NO_DISCORD_ID_TEXT}".`,
            ].join(" "),
          ),
          ...REMINDER_POST_FAILURES,
          "404": reminderPage(`The receipt token names no heart, or reminders are off: "${REMINDER_NOT_FOUND_TEXT}"`),
          "405": jsonError("Another method than the receipt path's GET and this POST; `Allow` lists them.", {
            methodNotAllowed: errorExample("Another method", "methodNotAllowed"),
          }),
        },
      },
    },
    "/reminders/confirm/{token}": reminderLinkItem({
      kind: "confirm",
      summary: "Confirm e-mail vote reminders (the confirm link's button)",
      done: '"Reminders on": the subscription is active; an e-mail leaves when the voter may vote again.',
      post: "The subscription becomes active. A confirm token is good once: a used one is the 404 page.",
    }),
    "/reminders/unsubscribe/{token}": reminderLinkItem({
      kind: "unsubscribe",
      summary: "Stop vote reminders (the page's button, or a mail client's RFC 8058 one-click POST)",
      done: '"Unsubscribed": no more vote reminders; unsubscribing again answers the same page.',
      post: "Ends the subscription. The link works until the ended subscription is removed (RETENTION_REMINDER_DAYS after it ended).",
    }),
    "/r/{server_id}": {
      get: {
        operationId: "followReferralLink",
        summary: "Follow a referral link",
        description: [
          "The public referral link a referrer shares. Records a click for the referrer and redirects to the server's",
          "registration URL with the click's token appended as the `ref_token` query parameter. The registration page keeps",
          "that token and the server's backend sends it as `token` in its events. Without a registration URL the token is",
          "returned as JSON.",
        ].join("\n"),
        tags: ["referrals"],
        security: [],
        parameters: [
          { name: "server_id", in: "path", required: true, description: "The server's id.", schema: { type: "string", format: "uuid" } },
          {
            name: "referrer",
            in: "query",
            required: true,
            description: "The referrer's player identity on the server list.",
            schema: { type: "string", minLength: 1, maxLength: maxCharsOf("referrer") },
          },
          { $ref: "#/components/parameters/X-Request-Id" },
        ],
        responses: {
          "302": {
            description: "Click recorded; go to the registration URL with the token appended.",
            headers: {
              Location: {
                description: "The registration URL with `ref_token=<token>` appended.",
                schema: { type: "string", format: "uri" },
              },
              "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" },
            },
          },
          "200": {
            description: "Click recorded; the server has no registration URL, so the token is returned.",
            headers: { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } },
            content: {
              "application/json": {
                schema: { $ref: "#/components/schemas/ReferralTokenResponse" },
                examples: { token: { summary: "The click's token", value: { token: "q3Zl5m1bWcQf0yJ8oTn2xHkR4sVdA7uE" } } },
              },
            },
          },
          "400": jsonError("`referrer` missing or invalid.", { missingReferrer: fieldErrorExample("No referrer", requiredText("referrer")) }),
          "404": jsonError("Unknown server, or referrals not enabled.", {
            unknownServer: errorExample("No such server", "unknownServer"),
            referralsDisabled: errorExample("Referrals disabled", "referralsDisabled"),
          }),
          "429": retryableError(
            `Too many referral clicks from this client address in the current window (REFERRAL_LINK_CLICKS_PER_IP): \`{"error": "${TOO_MANY_CLICKS_TEXT}"}\`; wait Retry-After seconds.`,
            {},
            "Seconds until the limit's window ends.",
          ),
          "500": jsonError("Internal error.", { internal: errorExample("Internal error", "internal") }),
          "503": unavailable(),
        },
      },
    },
  },
  webhooks: {
    heartCallback: {
      post: {
        operationId: "heartCallback",
        summary: "Reward callback: a heart counted (or a test)",
        description: [
          "Sent by the service to the reward callback URL set on the dashboard's integration tab when a player hearts the",
          "server and the vote counts (`heart.counted`), or when the owner sends a test (`heart.test`, nil `heart_id`, pays nothing).",
          "",
          'Verify before parsing: recompute lower-case hex `HMAC_SHA256(callback secret, "<t>.<rawBody>")` over the exact raw',
          "body (the key is the whole `whsec_...` string's UTF-8 bytes) and compare it, in constant time, with any `v1=` value of",
          "`X-Service-Signature`. During a secret rotation the header carries one `v1=` per active secret, newest first.",
          "`t` equals the body's `timestamp`; rejecting `t` more than 300 s from your clock is recommended.",
          "",
          "Any 2xx marks the delivery delivered. Anything else, or no answer within 10 s, is retried with exponential backoff",
          "and jitter for about two days. Key the reward on `heart_id` so a retried delivery never pays twice.",
        ].join("\n"),
        tags: ["callbacks"],
        security: [],
        parameters: [
          {
            name: "X-Service-Event",
            in: "header",
            required: true,
            description: "The event kind; equals the body's `event`.",
            schema: { type: "string", enum: ["heart.counted", "heart.test"] },
          },
          {
            name: "X-Service-Signature",
            in: "header",
            required: true,
            description: "`t=<unix>,v1=<hex>` (one or more `v1`, newest secret first); bare lower-case hex, no `sha256=` prefix.",
            schema: { type: "string", pattern: "^t=[0-9]+(,v1=[0-9a-f]{64})+$" },
            example: "t=1767225600,v1=5e8b0d1c3f2a4b6c8d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e",
          },
          {
            name: "webhook-id",
            in: "header",
            required: false,
            description: "Standard Webhooks header (only when the owner opted in): the `heart_id`.",
            schema: { type: "string" },
          },
          {
            name: "webhook-timestamp",
            in: "header",
            required: false,
            description: "Standard Webhooks header (only when opted in): Unix seconds, equal to `t`.",
            schema: { type: "string", pattern: "^[0-9]+$" },
          },
          {
            name: "webhook-signature",
            in: "header",
            required: false,
            description: [
              "Standard Webhooks header (only when opted in): space-separated `v1,<base64 HMAC>` entries (the symmetric opt-in)",
              'and/or one `v1a,<base64 ed25519 signature>` (the public-key opt-in) over `"<webhook-id>.<webhook-timestamp>.<rawBody>"`,',
              "verifiable with any key published at `/.well-known/webhook-keys.json`.",
            ].join(" "),
            schema: { type: "string" },
          },
        ],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: { $ref: "#/components/schemas/HeartEvent" },
              examples: {
                counted: {
                  summary: "A counted heart",
                  value: {
                    ...COUNTED_HEART_EXAMPLE,
                  },
                },
                test: {
                  summary: "A dashboard test callback",
                  value: {
                    event: "heart.test",
                    server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
                    username: "test-player",
                    heart_id: NIL_UUID,
                    period: "2026-01",
                    timestamp: 1767225600,
                  },
                },
              },
            },
          },
        },
        responses: CALLBACK_ANSWERS,
      },
    },
    heartCallbackV2: {
      post: {
        operationId: "heartCallbackV2",
        summary: "Reward callback, payload version 2 (an endpoint that pinned version 2)",
        description: [
          "Sent instead of `heartCallback`'s body to a callback endpoint whose owner pinned payload version 2. Every endpoint",
          "gets version 1 (the contract's body, `heartCallback`) unless its owner chose 2. The headers, the signature over the",
          "exact raw body, the retries and the answers are exactly `heartCallback`'s. The body has every version-1 field,",
          "unchanged, plus `payload_version` (always 2), `cast_at` and, each only when known (omitted, never null),",
          "`next_eligible_at`, `steam_id`, `discord_id`, `minecraft_uuid` and `account_id`. A `heart.test` to a version-2",
          "endpoint carries sample values in all of them.",
        ].join("\n"),
        tags: ["callbacks"],
        security: [],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: { $ref: "#/components/schemas/HeartEventV2" },
              examples: {
                counted: {
                  summary: "A counted heart of a voter who gave a Minecraft UUID",
                  value: {
                    ...COUNTED_HEART_EXAMPLE,
                    payload_version: 2,
                    cast_at: 1767225598,
                    next_eligible_at: 1767311998,
                    minecraft_uuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5",
                  },
                },
              },
            },
          },
        },
        responses: CALLBACK_ANSWERS,
      },
    },
    referralEvent: {
      post: {
        operationId: "referralEvent",
        summary: "Referral outcome: a referral registered, qualified or was reversed (opt-in per endpoint)",
        description: [
          "Sent to each callback endpoint of the server subscribed to the event type (CreateEndpoint / UpdateEndpoint",
          "`event_types`); a server without such an endpoint receives none. Signed exactly like the reward callback with the",
          "endpoint's own secret(s): `X-Service-Signature: t=<unix>,v1=<hex>` over `<t>.<rawBody>`, and when opted in the",
          "Standard Webhooks headers with `webhook-id` = `event_id`. Retried like the reward callback; key on `event_id`.",
        ].join("\n"),
        tags: ["callbacks"],
        security: [],
        parameters: [
          eventHeader(REFERRAL_EVENT_TYPES),
          {
            name: "X-Service-Signature",
            in: "header",
            required: true,
            description: "`t=<unix>,v1=<hex>` (one or more `v1`, newest secret first), as the reward callback.",
            schema: { type: "string", pattern: "^t=[0-9]+(,v1=[0-9a-f]{64})+$" },
          },
        ],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: { $ref: "#/components/schemas/ReferralOutcomeEvent" },
              examples: {
                qualified: {
                  summary: "A referral qualified",
                  value: {
                    event: "referral.qualified",
                    event_id: "9b1f3c2a-6d4e-4f70-8a1b-2c3d4e5f6a7b",
                    server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
                    referral_id: "2e4d6c8b-0a1f-4e3d-8c5b-7a9f1e3d5c7b",
                    referrer_identity: "alice#1",
                    referee_identity: "bob",
                    state: "qualified",
                    previous_state: "registered",
                    timestamp: 1767225600,
                  },
                },
              },
            },
          },
        },
        responses: CALLBACK_ANSWERS,
      },
    },
    heartCallbackV3: {
      post: {
        operationId: "heartCallbackV3",
        summary: "Reward callback, payload version 3 (an endpoint that pinned version 3)",
        description: [
          "Version 2's body (`heartCallbackV2`), every field in its order and with its value except `payload_version`, which",
          "says 3, followed by what the server's reward rules counted for the vote: `weight`, `month_total`, `total` and",
          "`reward_streak`, always present, null when the server has no saved reward rules. Headers, signature, retries and",
          "answers are `heartCallback`'s.",
        ].join("\n"),
        tags: ["callbacks"],
        security: [],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: { $ref: "#/components/schemas/HeartEventV3" },
              examples: {
                counted: {
                  summary: "A counted heart on a server with reward rules",
                  value: {
                    ...COUNTED_HEART_EXAMPLE,
                    payload_version: 3,
                    cast_at: 1767225598,
                    next_eligible_at: 1767311998,
                    weight: 2,
                    month_total: 10,
                    total: 41,
                    reward_streak: 7,
                  },
                },
              },
            },
          },
        },
        responses: CALLBACK_ANSWERS,
      },
    },
    progressionEvent: {
      post: {
        operationId: "progressionEvent",
        summary: "Progression event: a voter's reward streak grew or was lost, or a vote reached a milestone rule (opt-in per endpoint)",
        description: [
          "Sent to each callback endpoint subscribed to the event type, only for servers with saved reward rules, made with",
          "the vote's reward counts (exactly once per vote: a replayed vote makes none). Signed exactly like the reward",
          "callback with the endpoint's own secret(s); with the Standard Webhooks opt-in `webhook-id` = `event_id`. Key on",
          "`event_id`.",
        ].join("\n"),
        tags: ["callbacks"],
        security: [],
        parameters: [eventHeader(PROGRESSION_EVENT_TYPES)],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: { $ref: "#/components/schemas/ProgressionEvent" },
              examples: {
                milestone: {
                  summary: "The 10th vote of the month reached an `every: 10` rule",
                  value: {
                    event: "milestone.reached",
                    event_id: "2e4d6c8b-0a1f-8e3d-a5c7-b9d1f3e5a7c9",
                    server_id: "7d2c1a0e-4b5f-4c3d-9e8f-1a2b3c4d5e6f",
                    heart_id: "3f1e2d4c-5b6a-4798-8a7b-6c5d4e3f2a1b",
                    username: "Steve_42",
                    cast_at: 1767225598,
                    scope: "month",
                    count: 10,
                    rule_index: 0,
                    every: 10,
                    timestamp: 1767225600,
                  },
                },
              },
            },
          },
        },
        responses: CALLBACK_ANSWERS,
      },
    },
    heartEligible: {
      post: {
        operationId: "heartEligible",
        summary: "A voter may vote again: sent at a counted vote's next eligible time (opt-in per endpoint)",
        description: [
          "Sent once per counted vote, at its `next_eligible_at`, to each callback endpoint subscribed to `heart.eligible`",
          "(and on the pull list from then, when offered there), so a game can remind the player in game. Signed and retried",
          "exactly like a referral outcome; key on `event_id`.",
        ].join("\n"),
        tags: ["callbacks"],
        security: [],
        parameters: [eventHeader(["heart.eligible"])],
        requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/HeartEligibleEvent" } } } },
        responses: CALLBACK_ANSWERS,
      },
    },
    periodClosed: {
      post: {
        operationId: "periodClosed",
        summary: "A week or month closed: the server's final standings (opt-in per endpoint)",
        description: [
          "Sent once per server and period, when the period closer closes an ISO week or a UTC month of a server with reward",
          "rules, to each callback endpoint subscribed to `period.closed` (and to the pull list when offered there). Signed",
          "and retried exactly like a referral outcome; key on `event_id`.",
        ].join("\n"),
        tags: ["callbacks"],
        security: [],
        parameters: [
          { name: "X-Service-Event", in: "header", required: true, description: "`period.closed`.", schema: { type: "string", enum: ["period.closed"] } },
          {
            name: "X-Service-Signature",
            in: "header",
            required: true,
            description: "`t=<unix>,v1=<hex>` (one or more `v1`, newest secret first), as the reward callback.",
            schema: { type: "string", pattern: "^t=[0-9]+(,v1=[0-9a-f]{64})+$" },
          },
        ],
        requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/PeriodClosedEvent" } } } },
        responses: {
          "2XX": { description: "Acknowledged: the delivery is marked delivered and not retried." },
          default: { description: "Not acknowledged: the delivery is retried with backoff." },
        },
      },
    },
    goalReached: {
      post: {
        operationId: "goalReached",
        summary: "A network goal (vote party) counting the server reached its target (opt-in per endpoint)",
        description: [
          "Sent once per reached round to each of the goal's servers, to each callback endpoint subscribed to `goal.reached`",
          "(and to the pull list when offered there). Signed and retried exactly like a referral outcome; key on `event_id`.",
        ].join("\n"),
        tags: ["callbacks"],
        security: [],
        parameters: [
          { name: "X-Service-Event", in: "header", required: true, description: "`goal.reached`.", schema: { type: "string", enum: ["goal.reached"] } },
          {
            name: "X-Service-Signature",
            in: "header",
            required: true,
            description: "`t=<unix>,v1=<hex>` (one or more `v1`, newest secret first), as the reward callback.",
            schema: { type: "string", pattern: "^t=[0-9]+(,v1=[0-9a-f]{64})+$" },
          },
        ],
        requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/GoalReachedEvent" } } } },
        responses: {
          "2XX": { description: "Acknowledged: the delivery is marked delivered and not retried." },
          default: { description: "Not acknowledged: the delivery is retried with backoff." },
        },
      },
    },
  },
  components: {
    securitySchemes: {
      ServiceSignature: { type: "apiKey", in: "header", name: "X-Service-Signature", description: SIGNING_DESCRIPTION },
      ClaimKey: {
        type: "apiKey",
        in: "query",
        name: "key",
        description:
          "The server's claim key (`vck_...`, dashboard): read and claim that server's votes, and list and acknowledge its reward queue, only. A wrong key answers `0` (the queue: an empty one), never an error.",
      },
      PullSignature: {
        type: "apiKey",
        in: "header",
        name: "X-Service-Signature",
        description: `The ingest signature scheme, keyed with the server's pull secret (\`psec_...\`) instead of a referral secret.\n\n${SIGNING_DESCRIPTION}`,
      },
    },
    parameters: {
      "X-Request-Id": {
        name: "X-Request-Id",
        in: "header",
        required: false,
        description: "Your correlation id (1-128 of `A-Z a-z 0-9 . _ : -`); generated when absent. Echoed in the response.",
        schema: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,128}$" },
      },
    },
    headers: {
      "X-Request-Id": {
        description: "The request's correlation id; quote it when reporting a problem.",
        schema: { type: "string" },
      },
    },
    schemas: {
      VoteClaimDigit: {
        type: "string",
        enum: ["0", "1", "2"],
        description:
          "Exactly one byte, no newline. Check: 0 not found (or, pay-once mode, paid by another transport), 1 voted and not claimed, 2 claimed through this API. Claim: 0 nothing to claim (or paid by another transport), 1 claimed now, 2 already claimed through this API.",
      },
      VoteClaimAnswer: {
        type: "object",
        additionalProperties: false,
        required: ["voted", "claimed", "status", "heart_id", "voted_at", "claimed_at", "expires_at"],
        properties: {
          voted: { type: "boolean", description: "The player has a held or a claimed vote." },
          claimed: { type: "boolean", description: "Check: the vote was claimed through this API. Claim: this call claimed it (status `claimed_now`)." },
          status: {
            type: "string",
            enum: ["not_found", "voted_unclaimed", "claimed_now", "already_claimed", "paid_elsewhere"],
            description: "`paid_elsewhere` (pay-once mode): another transport (HTTP callback, Votifier, pull) paid the vote, or is paying it now; pay nothing.",
          },
          heart_id: { type: ["string", "null"], format: "uuid", description: "The vote (heart) the answer is about; null when not found." },
          voted_at: { type: ["string", "null"], format: "date-time" },
          claimed_at: { type: ["string", "null"], format: "date-time", description: "Null while unclaimed." },
          expires_at: { type: ["string", "null"], format: "date-time", description: "End of the vote's claim window." },
        },
      },
      RewardQueuePage: {
        type: "object",
        additionalProperties: false,
        required: ["entries", "next_check"],
        properties: {
          entries: { type: "array", maxItems: MAX_REWARD_QUEUE_PAGE, items: { $ref: "#/components/schemas/RewardQueueEntry" } },
          next_check: { type: "integer", minimum: 1, description: "Seconds to wait before listing again." },
        },
      },
      RewardQueueEntry: {
        type: "object",
        additionalProperties: false,
        required: ["id", "reason", "player", "commands", "online_only", "created_at"],
        properties: {
          id: { type: "string", format: "uuid", description: "The entry's id: the plugin's idempotency key; acknowledge it once its commands ran." },
          reason: { type: "string", enum: ["vote", "streak", "milestone", "lucky", "award", "referral", "reversal", "goal"] },
          player: {
            type: "object",
            additionalProperties: false,
            required: ["name", "steam_id", "discord_id", "minecraft_uuid", "account_id"],
            properties: {
              name: { type: "string", description: "The player as the vote named them." },
              steam_id: { type: ["string", "null"] },
              discord_id: { type: ["string", "null"] },
              minecraft_uuid: { type: ["string", "null"] },
              account_id: { type: ["string", "null"] },
            },
          },
          commands: { type: "array", items: { type: "string" }, description: "The commands to run, in order, rendered by the list." },
          online_only: { type: "boolean", description: "Run only while the player is on the game server." },
          created_at: { type: ["string", "null"], format: "date-time" },
        },
      },
      RewardQueueAckRequest: {
        type: "object",
        required: ["ids"],
        properties: { ids: { type: "array", minItems: 1, maxItems: MAX_ACK_IDS, items: { type: "string", format: "uuid" } } },
      },
      RewardQueueAckAnswer: {
        type: "object",
        additionalProperties: false,
        required: ["acked", "unknown"],
        properties: {
          acked: { type: "array", items: { type: "string", format: "uuid" }, description: "Acknowledged (by this call or an earlier one)." },
          unknown: {
            type: "array",
            items: { type: "string", format: "uuid" },
            description: "No entry of this server (or removed long after its acknowledgement).",
          },
        },
      },
      WebhookKeys: {
        type: "object",
        required: ["keys"],
        additionalProperties: false,
        properties: {
          keys: {
            type: "array",
            items: {
              type: "object",
              required: ["kid", "alg", "public_key", "created_at", "expires_at"],
              additionalProperties: false,
              properties: {
                kid: { type: "string" },
                alg: { type: "string", const: "Ed25519" },
                public_key: { type: "string", pattern: "^whpk_[A-Za-z0-9+/]{43}=$", description: "`whpk_` + base64 of the raw 32-byte public key." },
                created_at: { type: "string", format: "date-time" },
                expires_at: {
                  type: ["string", "null"],
                  format: "date-time",
                  description: "null while the key signs; after a rotation, the end of its overlap.",
                },
              },
            },
          },
        },
      },
      Jwks: {
        type: "object",
        required: ["keys"],
        additionalProperties: false,
        properties: {
          keys: {
            type: "array",
            items: {
              type: "object",
              required: ["kty", "crv", "alg", "use", "kid", "x"],
              additionalProperties: false,
              properties: {
                kty: { type: "string", const: "OKP" },
                crv: { type: "string", const: "Ed25519" },
                alg: { type: "string", const: "EdDSA" },
                use: { type: "string", const: "sig" },
                kid: { type: "string" },
                x: { type: "string", pattern: "^[A-Za-z0-9_-]{43}$" },
              },
            },
          },
        },
      },
      ReferralEvent: {
        type: "object",
        description: "Unknown extra fields are accepted. Empty strings count as missing; strings are trimmed; `null` counts as absent.",
        required: ["event", "token", "server_id", "server_event_id"],
        properties: {
          event: { type: "string", enum: [...REFERRAL_EVENTS], description: "The lifecycle event." },
          token: boundedString("token", "The referral token captured by the registration page (`ref_token`)."),
          server_id: nonEmptyString("The service's id for the game server; selects the signing secret."),
          referee_identity: boundedString(
            "referee_identity",
            "Required for `registered`; ignored on later events. The caller's stable id for the referred player; must never change.",
          ),
          server_event_id: boundedString("server_event_id", "The caller's idempotency key; deduplication is on (token, event, server_event_id)."),
          ts: { type: "integer", format: "int64", description: "Unix seconds of the caller's event time (not the signing `t`)." },
          test: { type: "boolean", description: "When true the request is fully verified but nothing is looked up or written." },
          reason: {
            description:
              `\`reversed\` only, optional: why. One of ${REVERSAL_REASONS.map((r) => `\`${r}\``).join(", ")}. It is stored, shown and sent on ` +
              `in the \`referral.reversed\` event. Never a 400: any other value (a non-string included) is kept as \`other\` with the ` +
              `text as sent, cut to ${maxCharsOf("reason")} characters. Ignored on other events.`,
            examples: ["chargeback"],
          },
        },
        additionalProperties: true,
        if: { properties: { event: { const: "registered" } }, required: ["event"] },
        then: {
          properties: { referee_identity: { type: "string", minLength: 1, pattern: "\\S" } },
          required: ["referee_identity"],
          additionalProperties: true,
        },
      },
      OkResponse: {
        description: "`ok` is always true; the other fields depend on the outcome.",
        oneOf: [
          { $ref: "#/components/schemas/AppliedResponse" },
          { $ref: "#/components/schemas/DuplicateResponse" },
          { $ref: "#/components/schemas/FirstTouchConflictResponse" },
          { $ref: "#/components/schemas/TestResponse" },
        ],
      },
      AppliedResponse: {
        type: "object",
        description: "The referral advanced, or was already in the requested state.",
        required: ["ok", "referral_id", "state"],
        properties: {
          ok: { const: true },
          referral_id: { type: "string", format: "uuid" },
          state: { type: "string", enum: [...ANCHOR_STATES] },
        },
        additionalProperties: false,
      },
      DuplicateResponse: {
        type: "object",
        description: "An exact replay of an already-seen (token, event, server_event_id).",
        required: ["ok", "duplicate"],
        properties: { ok: { const: true }, duplicate: { const: true } },
        additionalProperties: false,
      },
      FirstTouchConflictResponse: {
        type: "object",
        description: "A different referrer already registered this referee; nothing applied.",
        required: ["ok", "ignored"],
        properties: { ok: { const: true }, ignored: { const: "first_touch_conflict" } },
        additionalProperties: false,
      },
      TestResponse: {
        type: "object",
        description: "A `test: true` dry-run passed every check.",
        required: ["ok", "test"],
        properties: { ok: { const: true }, test: { const: true } },
        additionalProperties: false,
      },
      ErrorResponse: {
        type: "object",
        required: ["error"],
        properties: { error: { type: "string", description: "Human-readable message." } },
        additionalProperties: false,
      },
      TransitionErrorResponse: {
        type: "object",
        required: ["error", "from", "event"],
        properties: {
          error: { const: ERROR_TEXT.invalidTransition },
          from: {
            type: "string",
            enum: [...REFERRAL_STATES],
            description: "The referral's current state.",
          },
          event: { type: "string", enum: [...REFERRAL_EVENTS], description: "The rejected event." },
        },
        additionalProperties: false,
      },
      Receipt: {
        type: "object",
        description: "One heart as its voter may see it: no other player's data, no voter identity, IP, fraud scoring or server internals.",
        required: ["server_name", "username", "cast_at", "counted", "outcome", "next_vote_at", "period", "deliveries", "claim"],
        properties: {
          server_name: { type: "string", description: "The server's display name." },
          username: { type: "string", description: "The in-game name as the voter typed it." },
          cast_at: { type: "string", format: "date-time" },
          counted: { type: "boolean", description: "True when `outcome` is `counted`." },
          outcome: {
            type: "string",
            enum: ["counted", "cooldown", "not_counted", "erased"],
            description:
              "`cooldown`: the voter's heart for this server already counted in the 24 hours before; `not_counted`: not counted, no reason given; `erased`: the voter's data was erased at their request (nothing more is shown).",
          },
          next_vote_at: {
            type: ["string", "null"],
            format: "date-time",
            description: "When this voter's next heart for this server can count (`counted` and `cooldown`); null otherwise.",
          },
          period: { type: "string", pattern: PERIOD_PATTERN.source, description: "The UTC month of the heart, `YYYY-MM`." },
          deliveries: {
            type: "array",
            description: "One per transport a counted heart goes out over; empty when not counted, or counted a moment ago.",
            items: {
              type: "object",
              required: ["transport", "status", "delivered_at"],
              properties: {
                transport: { type: "string", enum: ["callback", "votifier", "pull"] },
                status: {
                  type: "string",
                  enum: ["delivered", "waiting", "failed"],
                  description:
                    "`delivered`: the server received it; `waiting`: not yet (retried automatically, or waiting for the server to collect it); `failed`: could not be delivered.",
                },
                delivered_at: { type: ["string", "null"], format: "date-time" },
              },
              additionalProperties: false,
            },
          },
          claim: {
            type: ["object", "null"],
            description: "Where the heart stands in the server's claim ledger (rewards claimed in game by reward plugins); null when it is not in the ledger.",
            required: ["state", "held_until", "claimed_at", "expired_at"],
            properties: {
              state: {
                type: "string",
                enum: ["held", "claimed", "expired", "withdrawn"],
                description:
                  "`held`: claim it in game before `held_until`; `claimed`: claimed at `claimed_at`; `expired`: not claimed, ended at `expired_at`; `withdrawn`: nothing to claim (on a pay-once server: another transport paid it, see `paid_by`).",
              },
              held_until: { type: ["string", "null"], format: "date-time" },
              claimed_at: { type: ["string", "null"], format: "date-time" },
              expired_at: { type: ["string", "null"], format: "date-time" },
            },
            additionalProperties: false,
          },
          paid_by: {
            type: "string",
            enum: ["claim", "pull", "callback", "votifier"],
            description:
              "Only on servers in pay-once mode, once a transport paid the heart: which one (`claim`: claimed in game; `pull`: collected over the pull API; `callback`: a callback the server answered 2xx; `votifier`: a Votifier vote the server accepted). Absent otherwise.",
          },
          paid_at: { type: "string", format: "date-time", description: "With `paid_by`: when it paid." },
        },
        additionalProperties: false,
      },
      ReferralTokenResponse: {
        type: "object",
        required: ["token"],
        properties: { token: { type: "string", minLength: 22, description: "The click's unguessable, URL-safe token." } },
        additionalProperties: false,
      },
      PullHeartsRequest: {
        type: "object",
        required: ["server_id"],
        properties: {
          server_id: nonEmptyString("The server whose hearts to list; selects the pull secret."),
          cursor: { type: "string", description: "`next_cursor` of the previous page; absent or empty for the first page." },
          limit: { type: "integer", minimum: 0, maximum: 500, description: "Hearts per page, 1-500; absent or 0 means 100." },
        },
        additionalProperties: true,
      },
      PullHeartsResponse: {
        type: "object",
        required: ["hearts", "next_cursor"],
        properties: {
          hearts: { type: "array", items: { $ref: "#/components/schemas/PullHeart" } },
          next_cursor: { type: ["string", "null"], description: "Pass as `cursor` for the next page; null on the last page." },
        },
        additionalProperties: false,
      },
      PullHeart: {
        type: "object",
        required: ["heart_id", "username", "period", "counted_at"],
        properties: {
          heart_id: { type: "string", format: "uuid", description: "The vote's unique id: claim it, and key the reward on it." },
          username: { type: "string", description: "The voter's in-game name as typed when voting; the reward recipient." },
          period: { type: "string", pattern: PERIOD_PATTERN.source, description: "The vote's ranking period, `YYYY-MM` (UTC month)." },
          counted_at: { type: "string", format: "date-time", description: "When the heart counted." },
          streak_day: { type: "integer", minimum: 1, description: "The voter's daily streak when the heart counted; omitted when unknown." },
          next_eligible_at: {
            type: "string",
            format: "date-time",
            description: "When the voter may count again for this server (the end of the cooldown); omitted when unknown.",
          },
          ...PLATFORM_ID_PROPERTIES,
        },
        additionalProperties: false,
      },
      PullClaimsRequest: {
        type: "object",
        required: ["server_id", "heart_ids"],
        properties: {
          server_id: nonEmptyString("The server whose hearts to claim; selects the pull secret."),
          heart_ids: { type: "array", minItems: 1, maxItems: 500, items: { type: "string" }, description: "The hearts to claim." },
        },
        additionalProperties: true,
      },
      PullClaimsResponse: {
        type: "object",
        required: ["results"],
        properties: {
          results: {
            type: "array",
            items: {
              type: "object",
              required: ["heart_id", "status"],
              properties: {
                heart_id: { type: "string" },
                status: {
                  type: "string",
                  enum: ["claimed", "already_claimed", "unknown"],
                  description: "`claimed`: now delivered; `already_claimed`: claimed before; `unknown`: not a pullable heart of this server.",
                },
              },
              additionalProperties: false,
            },
          },
        },
        additionalProperties: false,
      },
      PullEventsRequest: {
        type: "object",
        required: ["server_id"],
        properties: {
          server_id: nonEmptyString("The server whose referral events to list; selects the pull secret."),
          cursor: { type: "string", description: "`next_cursor` of the previous page; absent or empty for the first page." },
          limit: { type: "integer", minimum: 0, maximum: MAX_PULL_PAGE, description: "Events per page, 1-500; absent or 0 means 100." },
        },
        additionalProperties: true,
      },
      PullEventsResponse: {
        type: "object",
        required: ["events", "next_cursor"],
        properties: {
          events: {
            type: "array",
            items: {
              oneOf: [
                { $ref: "#/components/schemas/PullEvent" },
                { $ref: "#/components/schemas/PullPeriodClosedEvent" },
                { $ref: "#/components/schemas/PullGoalReachedEvent" },
                { $ref: "#/components/schemas/PullHeartEligibleEvent" },
              ],
            },
          },
          next_cursor: { type: ["string", "null"], description: "Pass as `cursor` for the next page; null on the last page." },
        },
        additionalProperties: false,
      },
      PullEvent: {
        description: "A referral outcome or a progression event waiting to be claimed.",
        oneOf: [{ $ref: "#/components/schemas/ReferralPullEvent" }, { $ref: "#/components/schemas/ProgressionPullEvent" }],
      },
      ProgressionPullEvent: progressionEventSchema(
        "A progression event waiting to be claimed: the progression callback's fields, `occurred_at` instead of `timestamp`.",
        "occurred_at",
        { type: "string", format: "date-time", description: "When the vote counted." },
      ),
      ReferralPullEvent: {
        type: "object",
        description: "A referral outcome waiting to be claimed: the referral callback's fields, `occurred_at` instead of `timestamp`.",
        required: ["event", "event_id", "server_id", "referral_id", "referrer_identity", "referee_identity", "state", "previous_state", "occurred_at"],
        properties: {
          event: { type: "string", enum: [...REFERRAL_EVENT_TYPES] },
          event_id: { type: "string", format: "uuid", description: "The transition's id: claim it, and key the reward on it." },
          server_id: { type: "string", format: "uuid" },
          referral_id: { type: "string", format: "uuid" },
          referrer_identity: { type: "string", description: "The referrer, as recorded at the click." },
          referee_identity: { type: "string" },
          state: { type: "string", enum: ["registered", "qualified", "reversed"] },
          previous_state: { type: "string", enum: ["clicked", "registered", "qualified"] },
          reason: { type: "string", description: "`referral.reversed` only, when the reversal sent one." },
          reason_text: { type: "string", description: "`referral.reversed` only: the reason as sent, when it was not a known value." },
          occurred_at: { type: "string", format: "date-time", description: "When the referral changed state." },
        },
        additionalProperties: false,
      },
      PullPeriodClosedEvent: {
        type: "object",
        description: "A closed period waiting to be claimed: the `period.closed` callback's fields, `occurred_at` instead of `timestamp`.",
        required: ["event", "event_id", "server_id", "kind", "period", "starts_at", "ends_at", "standings", "occurred_at"],
        properties: {
          ...PERIOD_CLOSED_FIELDS,
          occurred_at: { type: "string", format: "date-time", description: "When the period was closed." },
        },
        additionalProperties: false,
      },
      PullGoalReachedEvent: {
        type: "object",
        description: "A reached network goal waiting to be claimed: the `goal.reached` callback's fields, `occurred_at` instead of `timestamp`.",
        required: [...GOAL_REACHED_REQUIRED, "occurred_at"],
        properties: {
          ...GOAL_REACHED_FIELDS,
          occurred_at: { type: "string", format: "date-time", description: "When the goal was reached." },
        },
        additionalProperties: false,
      },
      GoalReachedEvent: {
        type: "object",
        description: "A network goal (vote party) counting the server reached its target.",
        required: [...GOAL_REACHED_REQUIRED, "timestamp"],
        properties: {
          ...GOAL_REACHED_FIELDS,
          timestamp: { type: "integer", format: "int64", description: "Unix seconds of this attempt; also the signature's `t`." },
        },
      },
      PullHeartEligibleEvent: {
        type: "object",
        description: "A voter who may vote again, listed from that time: the `heart.eligible` callback's fields, `occurred_at` instead of `timestamp`.",
        required: ["event", "event_id", "server_id", "heart_id", "username", "cast_at", "eligible_at", "occurred_at"],
        properties: { ...HEART_ELIGIBLE_FIELDS, occurred_at: { type: "string", format: "date-time", description: "When the vote counted." } },
        additionalProperties: false,
      },
      HeartEligibleEvent: {
        type: "object",
        description: "A counted vote's voter may vote again (docs/callbacks.md, heart.eligible).",
        required: ["event", "event_id", "server_id", "heart_id", "username", "cast_at", "eligible_at", "timestamp"],
        properties: {
          ...HEART_ELIGIBLE_FIELDS,
          timestamp: { type: "integer", format: "int64", description: "Unix seconds of this attempt; also the signature's `t`." },
        },
        additionalProperties: false,
      },
      PeriodClosedEvent: {
        type: "object",
        description: `A week or month closed: the server's final standings, top ${PERIOD_CLOSED_TOP}.`,
        required: ["event", "event_id", "server_id", "kind", "period", "starts_at", "ends_at", "standings", "timestamp"],
        properties: {
          ...PERIOD_CLOSED_FIELDS,
          timestamp: { type: "integer", format: "int64", description: "Unix seconds of this attempt; also the signature's `t`." },
        },
      },
      PullEventClaimsRequest: {
        type: "object",
        required: ["server_id", "event_ids"],
        properties: {
          server_id: nonEmptyString("The server whose referral events to claim; selects the pull secret."),
          event_ids: { type: "array", minItems: 1, maxItems: 500, items: { type: "string" }, description: "The referral events to claim." },
        },
        additionalProperties: true,
      },
      PullEventClaimsResponse: {
        type: "object",
        required: ["results"],
        properties: {
          results: {
            type: "array",
            items: {
              type: "object",
              required: ["event_id", "status"],
              properties: {
                event_id: { type: "string" },
                status: {
                  type: "string",
                  enum: ["claimed", "already_claimed", "unknown"],
                  description: "`claimed`: now delivered; `already_claimed`: claimed before; `unknown`: not a pullable referral event of this server.",
                },
              },
              additionalProperties: false,
            },
          },
        },
        additionalProperties: false,
      },
      ReferralOutcomeEvent: {
        type: "object",
        description: "A referral outcome sent to an endpoint subscribed to its type.",
        required: ["event", "event_id", "server_id", "referral_id", "referrer_identity", "referee_identity", "state", "previous_state", "timestamp"],
        properties: {
          event: { type: "string", enum: [...REFERRAL_EVENT_TYPES] },
          event_id: { type: "string", description: "The transition's id; the receiver's idempotency key and the `webhook-id`." },
          server_id: { type: "string", format: "uuid" },
          referral_id: { type: "string", format: "uuid" },
          referrer_identity: { type: "string", description: "The referrer, as recorded at the click." },
          referee_identity: { type: "string" },
          state: { type: "string", enum: ["registered", "qualified", "reversed"] },
          previous_state: { type: "string", enum: ["clicked", "registered", "qualified"] },
          reason: { type: "string", description: "`referral.reversed` only, when the reversal sent one." },
          reason_text: { type: "string", description: "`referral.reversed` only: the reason as sent, when it was not a known value." },
          timestamp: { type: "integer", format: "int64", description: "Unix seconds of this attempt; also the signature's `t`." },
        },
      },
      HeartEvent: {
        type: "object",
        description: "The reward callback body.",
        required: ["event", "server_id", "username", "heart_id", "period", "timestamp"],
        properties: {
          event: {
            type: "string",
            enum: ["heart.counted", "heart.test"],
            description: "`heart.counted` for a real counted vote; `heart.test` for a dashboard test callback.",
          },
          server_id: {
            type: "string",
            format: "uuid",
            description: "The server the heart was cast for. It identifies the server, not the player; it is not the reward recipient.",
          },
          username: {
            type: "string",
            maxLength: maxCharsOf("username"),
            description: "The voter's in-game name as typed when voting; the reward recipient.",
          },
          heart_id: {
            type: "string",
            format: "uuid",
            description: "The vote's unique id and the receiver's idempotency key; all zeros for `heart.test`.",
          },
          period: { type: "string", pattern: PERIOD_PATTERN.source, description: "The vote's ranking period, `YYYY-MM` (UTC month)." },
          timestamp: { type: "integer", format: "int64", description: "Unix seconds at delivery time; also the signature's `t`." },
          streak_day: {
            type: "integer",
            minimum: 0,
            description: "The voter's current daily vote streak in days for this server. Omitted when unavailable (missing means no info, not zero).",
          },
        },
      },
      HeartEventV2: {
        description: "The reward callback body of payload version 2: every HeartEvent field plus these.",
        allOf: [
          { $ref: "#/components/schemas/HeartEvent" },
          {
            type: "object",
            required: ["payload_version", "cast_at"],
            properties: {
              payload_version: { type: "integer", const: 2, description: "The body's payload version: always 2 here (a version-1 body has no such field)." },
              cast_at: {
                type: "integer",
                format: "int64",
                description: "Unix seconds when the heart was cast (a heart counts when it is cast); for `heart.test`, when the test was sent.",
              },
              next_eligible_at: {
                type: "integer",
                format: "int64",
                description: "Unix seconds when the voter may count again for this server (the end of the cooldown). Omitted when unknown.",
              },
              ...PLATFORM_ID_PROPERTIES,
            },
          },
        ],
      },
      HeartEventV3: {
        description: "The reward callback body of payload version 3: version 2's fields (`payload_version` 3), then the reward counts.",
        allOf: [
          { $ref: "#/components/schemas/HeartEvent" },
          {
            type: "object",
            required: ["payload_version", "cast_at", "weight", "month_total", "total", "reward_streak"],
            properties: {
              payload_version: { type: "integer", const: 3, description: "The body's payload version: 3 here." },
              cast_at: { $ref: "#/components/schemas/HeartEventV2/allOf/1/properties/cast_at" },
              next_eligible_at: { $ref: "#/components/schemas/HeartEventV2/allOf/1/properties/next_eligible_at" },
              ...PLATFORM_ID_PROPERTIES,
              weight: { type: ["integer", "null"], description: "The vote's weight under the reward rules; null without saved rules." },
              month_total: {
                type: ["integer", "null"],
                description: "The voter's counted votes in the UTC month, this one included; null without saved rules.",
              },
              total: { type: ["integer", "null"], description: "The voter's counted votes, all time, this one included; null without saved rules." },
              reward_streak: {
                type: ["integer", "null"],
                description: "The reward streak with this vote (missed days inside the rules' grace do not break it); null without saved rules.",
              },
            },
          },
        ],
      },
      ProgressionEvent: progressionEventSchema(
        "A progression event sent to an endpoint subscribed to its type (docs/callbacks.md, Progression events).",
        "timestamp",
        { type: "integer", format: "int64", description: "Unix seconds of this attempt; also the signature's `t`." },
      ),
    },
  },
} as const;
