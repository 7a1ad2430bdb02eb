/**
 * The commands that need no service token: `sign` and `verify` (both signature schemes, with the
 * dashboard debugger's own logic, gateway/dashboard/static/signature-check.js, and the rules built
 * from the gateway's constants) and `events send` (a signed ingest event to the public gateway).
 */
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { SIGNATURE_RULES } from "../../../gateway/dashboard/signature-rules.js";
import { checkSignature, createMacEngine, parseHeader, type Finding, type Scheme } from "../../../gateway/dashboard/static/signature-check.js";
import { ERROR_TEXT, INGEST_PATH } from "../../../services/shared/values/contract.js";
import {
  SIGNATURE_TOLERANCE_SECONDS,
  formatCallbackSignature,
  formatIngestSignature,
  formatStandardWebhookSignature,
} from "../../../services/shared/values/signature.js";
import { stringFlag, type Command, type CommandContext } from "../command.js";
import { CLI_NAME, CLI_RUN } from "../name.js";
import { CliError, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, formatPairs } from "../output.js";

const BODY_FLAGS = {
  body: { type: "string" },
  "body-file": { type: "string" },
} as const;
const BODY_HELP: [string, string][] = [
  ["--body TEXT", "the raw body"],
  ["--body-file PATH", "read the raw body from a file, byte for byte (- for stdin; stdin is read when neither is given)"],
];

async function readBody(ctx: CommandContext): Promise<string> {
  const text = ctx.flags.body;
  if (typeof text === "string") return text;
  const file = ctx.flags["body-file"];
  if (typeof file === "string" && file !== "-") {
    try {
      return readFileSync(file, "utf8");
    } catch (error) {
      // Failure policy: an unreadable file is the caller's to fix; its error code says why.
      throw new CliError(`cannot read --body-file ${file}: ${(error as NodeJS.ErrnoException).code ?? "error"}`, { exitCode: EXIT_USAGE });
    }
  }
  if (file === undefined && process.stdin.isTTY) {
    throw new CliError("no body: pass --body, --body-file PATH, or pipe it on stdin", { exitCode: EXIT_USAGE });
  }
  return (await ctx.readStdin()).toString("utf8");
}

function readScheme(ctx: CommandContext, guess: () => Scheme): Scheme {
  const scheme = stringFlag(ctx.flags, "scheme");
  if (scheme === undefined) return guess();
  if (scheme !== "ingest" && scheme !== "callback") {
    throw new CliError(`--scheme must be ingest or callback, not "${scheme}"`, {
      hint: "ingest: referral events and pull requests (rsec_, psec_); callback: reward callbacks (whsec_)",
      exitCode: EXIT_USAGE,
    });
  }
  return scheme;
}

function readUnixSeconds(ctx: CommandContext, flag: string): number {
  const text = stringFlag(ctx.flags, flag);
  if (text === undefined) return Math.floor(Date.now() / 1000);
  if (!/^-?\d{1,16}$/.test(text))
    throw new CliError(`--${flag} must be whole Unix seconds`, { hint: `for example --${flag} ${Math.floor(Date.now() / 1000)}`, exitCode: EXIT_USAGE });
  return Number(text);
}

function requireSecret(ctx: CommandContext): string {
  const secret = ctx.flags.secret;
  if (typeof secret !== "string" || secret === "") {
    throw new CliError("--secret is required", { hint: "the whole secret string, prefix included (rsec_..., psec_... or whsec_...)", exitCode: EXIT_USAGE });
  }
  return secret;
}

export const sign: Command = {
  name: "sign",
  summary: "compute the signature headers for a body, a secret and a time",
  usage: "--secret SECRET [--scheme ingest|callback] [--t UNIX] [--kid KID] [--webhook-id ID] [--body TEXT | --body-file PATH]",
  flagHelp: [
    ["--secret SECRET", "rsec_/psec_ (ingest scheme) or whsec_ (callback scheme); the whole string is the HMAC key"],
    ["--scheme S", "ingest (t=..,v1=sha256=<hex>) or callback (t=..,v1=<hex>); default from the secret's prefix"],
    ["--t UNIX", "the timestamp to sign with (default now)"],
    ["--kid KID", "ingest: name the secret's key id in the header"],
    ["--webhook-id ID", "callback: also the Standard Webhooks headers, with this webhook-id (the heart_id)"],
    ...BODY_HELP,
  ],
  flags: {
    secret: { type: "string" },
    scheme: { type: "string" },
    t: { type: "string" },
    kid: { type: "string" },
    "webhook-id": { type: "string" },
    ...BODY_FLAGS,
  },
  examples: [
    `echo -n '{"event":"registered",...}' | ${CLI_RUN} sign --secret rsec_...`,
    `${CLI_RUN} sign --secret whsec_... --body-file body.json --t 1700000000`,
  ],
  async run(ctx) {
    const secret = requireSecret(ctx);
    const scheme = readScheme(ctx, () => (secret.startsWith("whsec_") ? "callback" : "ingest"));
    const t = readUnixSeconds(ctx, "t");
    const body = await readBody(ctx);
    const kid = stringFlag(ctx.flags, "kid");
    const webhookId = stringFlag(ctx.flags, "webhook-id");
    if (webhookId !== undefined && scheme !== "callback") throw new CliError("--webhook-id goes with the callback scheme (whsec_)", { exitCode: EXIT_USAGE });
    const headers: Record<string, string> = {
      "X-Service-Signature": scheme === "ingest" ? formatIngestSignature(secret, t, body, kid) : formatCallbackSignature([secret], t, body),
    };
    if (webhookId !== undefined) {
      headers["webhook-id"] = webhookId;
      headers["webhook-timestamp"] = String(t);
      headers["webhook-signature"] = formatStandardWebhookSignature([secret], webhookId, t, body);
    }
    ctx.out.result({ scheme, t, canonical: `${t}.${body}`, headers });
    for (const [name, value] of Object.entries(headers)) ctx.out.line(`${name}: ${value}`);
    return EXIT_OK;
  },
};

const MARK: Record<Finding["level"], string> = { ok: "ok   ", info: "info ", warn: "warn ", error: "error" };

/** The Standard Webhooks check: webhook-signature "v1,<base64>" entries against the whsec_ secret's decoded key. */
function checkStandardWebhooks(input: { id: string; timestamp: string; signature: string; body: string; secret: string; nowSeconds: number }): Finding[] {
  const findings: Finding[] = [];
  if (!/^\d{1,16}$/.test(input.timestamp)) return [{ level: "error", part: "t", message: `webhook-timestamp=${input.timestamp} is not Unix seconds.` }];
  const t = Number(input.timestamp);
  const expected = formatStandardWebhookSignature([input.secret], input.id, t, input.body);
  const presented = input.signature.split(" ").filter(Boolean);
  if (presented.includes(expected))
    findings.push({ level: "ok", part: "mac", message: "webhook-signature matches (HMAC keyed with the base64-decoded whsec_ secret)." });
  else {
    findings.push({ level: "error", part: "mac", message: `webhook-signature does not match. Expected ${expected}.` });
    if (!input.secret.startsWith("whsec_"))
      findings.push({ level: "warn", part: "secret", message: 'The secret has no "whsec_" prefix: paste the whole callback secret.' });
    const rawKeyed = formatCallbackSignature([input.secret], t, `${input.id}.${input.body}`);
    if (presented.some((p) => p.startsWith("v1,") && Buffer.from(p.slice(3), "base64").toString("hex") === rawKeyed.split("v1=")[1]))
      findings.push({
        level: "error",
        part: "mac",
        message: "It was keyed with the whole whsec_ string's bytes: Standard Webhooks keys the HMAC with the base64-decoded part after whsec_.",
      });
  }
  if (Math.abs(input.nowSeconds - t) > SIGNATURE_TOLERANCE_SECONDS)
    findings.push({ level: "warn", part: "t", message: `webhook-timestamp is outside ±${SIGNATURE_TOLERANCE_SECONDS} s of the time checked against.` });
  return findings;
}

/** The signed string as printed: control characters escaped (so a trailing newline or a carriage return shows), with its byte count. */
function describeSignedString(signed: string): string {
  const escaped = signed.replace(/\p{Cc}/gu, (c) =>
    c === "\n" ? "\\n" : c === "\r" ? "\\r" : c === "\t" ? "\\t" : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
  const bytes = Buffer.byteLength(signed, "utf8");
  return `${escaped}  (${bytes} bytes: t, a dot, then the raw body${escaped === signed ? "" : "; control characters shown escaped"})`;
}

function lowerFirst(text: string): string {
  return /^[A-Z][a-z]/.test(text) ? text.charAt(0).toLowerCase() + text.slice(1) : text;
}

export const verify: Command = {
  name: "verify",
  summary: "check a signature header against a body and a secret, naming the usual mistakes (as the dashboard's debugger)",
  usage:
    "--header VALUE --secret SECRET [--scheme ingest|callback] [--now UNIX] [--body TEXT | --body-file PATH] [--webhook-id ID --webhook-timestamp T --webhook-signature S]",
  flagHelp: [
    ["--header VALUE", "the X-Service-Signature value (t=...,v1=...)"],
    ["--secret SECRET", "the secret it should verify with (without it: only the header's shape is checked)"],
    ["--scheme S", "ingest or callback; default from the header (v1=sha256= is ingest) or the secret's prefix"],
    ["--now UNIX", "the time to check t against (default now)"],
    ["--webhook-id ID", "with --webhook-timestamp and --webhook-signature: check the Standard Webhooks headers too"],
    ...BODY_HELP,
  ],
  flags: {
    header: { type: "string" },
    secret: { type: "string" },
    scheme: { type: "string" },
    now: { type: "string" },
    "webhook-id": { type: "string" },
    "webhook-timestamp": { type: "string" },
    "webhook-signature": { type: "string" },
    ...BODY_FLAGS,
  },
  examples: [`${CLI_RUN} verify --header 't=1700000000,v1=5f2c...' --secret whsec_... --body-file body.json`],
  async run(ctx) {
    const header = ctx.flags.header;
    if (typeof header !== "string" || header.trim() === "") {
      throw new CliError("--header is required", { hint: "the X-Service-Signature value, for example --header 't=1700000000,v1=...'", exitCode: EXIT_USAGE });
    }
    const secret = typeof ctx.flags.secret === "string" ? ctx.flags.secret : "";
    const scheme = readScheme(ctx, () =>
      header.includes("v1=sha256=") ? "ingest" : /v1=[0-9a-fA-F]/.test(header) ? "callback" : secret.startsWith("whsec_") ? "callback" : "ingest",
    );
    const nowSeconds = readUnixSeconds(ctx, "now");
    const body = await readBody(ctx);
    const report = await checkSignature({ scheme, header, body, secret, nowSeconds }, SIGNATURE_RULES, createMacEngine(globalThis.crypto.subtle));
    const findings = [...report.findings];
    let webhookValid: boolean | undefined;
    const id = stringFlag(ctx.flags, "webhook-id");
    const ts = stringFlag(ctx.flags, "webhook-timestamp");
    const sig = stringFlag(ctx.flags, "webhook-signature");
    if (id !== undefined || ts !== undefined || sig !== undefined) {
      if (id === undefined || ts === undefined || sig === undefined) {
        throw new CliError("the Standard Webhooks check needs --webhook-id, --webhook-timestamp and --webhook-signature together", { exitCode: EXIT_USAGE });
      }
      const more = checkStandardWebhooks({ id, timestamp: ts, signature: sig, body, secret, nowSeconds });
      webhookValid = !more.some((f) => f.level === "error");
      findings.push(...more);
    }
    const valid = report.verdict === "valid" && webhookValid !== false;
    // The header as the checker parsed it: the v1 values as received, and why it is malformed when it is.
    const parsed = parseHeader(header, scheme, SIGNATURE_RULES);
    const received = parsed.macs.map((m) => m.text);
    const expected = report.expectedHex === null ? null : `${scheme === "ingest" ? "sha256=" : ""}${report.expectedHex}`;
    ctx.out.result({
      valid,
      scheme,
      verdict: report.verdict,
      standard_webhooks_valid: webhookValid ?? null,
      canonical: report.canonical,
      expected_signature: expected,
      received_signatures: received,
      expected_header: report.expectedHeader,
      service_answer: report.answer,
      findings,
    });
    ctx.out.line(`${valid ? "VALID" : report.verdict.toUpperCase()}  (${scheme} scheme)`);
    for (const f of findings) ctx.out.line(`  ${MARK[f.level]}  ${f.part.padEnd(6)}  ${f.message}`);
    ctx.out.line();
    ctx.out.line(
      formatPairs([
        ["  canonical string", report.canonical === null ? "(none: the header has no t)" : describeSignedString(report.canonical)],
        ["  expected v1", expected ?? "(pass --secret to compute it)"],
        ...(received.length === 0 ? ([["  received v1", "(none)"]] as [string, string][]) : received.map((r) => ["  received v1", r] as [string, string])),
        ...(report.expectedHeader ? ([["  expected header", report.expectedHeader]] as [string, string][]) : []),
      ]),
    );
    if (report.answer) {
      // The contract gives every malformed header one text; the reason it is malformed is the parser's first error.
      const why = parsed.malformed ? parsed.findings.find((f) => f.level === "error")?.message : undefined;
      ctx.out.line(`  the gateway would answer ${report.answer.status} "${report.answer.error}"${why ? ` because ${lowerFirst(why).replace(/\.$/, "")}` : ""}`);
    }
    return valid ? EXIT_OK : EXIT_FAILURE;
  },
};

/** Each referral event and the flags it needs beyond --server, --secret and --token (the contract's "required for" column). */
const EVENT_FLAGS: Record<string, { flag: string; field: string; example: string }[]> = {
  registered: [{ flag: "referee", field: "referee_identity", example: "player-1" }],
  qualified: [],
  reversed: [],
};
const REFERRAL_EVENTS = Object.keys(EVENT_FLAGS);

export const eventsSend: Command = {
  name: "events send",
  summary: "send a signed referral event to the gateway's public ingest endpoint",
  usage:
    "--server ID --secret rsec_... --token T (--event registered --referee R | --event qualified | --event reversed [--reason R]) [--id SERVER_EVENT_ID] [--kid KID]",
  flagHelp: [
    ["--server ID", "the server the event is for"],
    ["--secret rsec_...", "the server's referral secret"],
    ["--event E", "registered, qualified or reversed"],
    ["--token T", `the click token the referral link gave the player (\`${CLI_RUN} clicks record\` prints one)`],
    ["--referee R", "required with --event registered: the referred player's stable identity on your server"],
    ["--reason R", "with --event reversed: refund, chargeback, fraud, abuse, test or other"],
    ["--id ID", "server_event_id, your idempotency key (default: a random one)"],
    ["--kid KID", "name the secret's key id in the header"],
  ],
  flags: {
    server: { type: "string" },
    secret: { type: "string" },
    event: { type: "string" },
    token: { type: "string" },
    referee: { type: "string" },
    reason: { type: "string" },
    id: { type: "string" },
    kid: { type: "string" },
  },
  examples: [
    `${CLI_RUN} clicks record --server 0b7c...          # prints a click token`,
    `${CLI_RUN} events send --server 0b7c... --secret rsec_... --event registered --token <token> --referee player-1`,
    `${CLI_RUN} events send --server 0b7c... --secret rsec_... --event qualified --token <token>`,
  ],
  async run(ctx) {
    // --token here is the click token, not the service token: this command talks only to the public gateway.
    const need = (name: string, example: string, why = "") => {
      const value = stringFlag(ctx.flags, name);
      if (value === undefined) throw new CliError(`--${name} is required${why}`, { hint: `for example --${name} ${example}`, exitCode: EXIT_USAGE });
      return value;
    };
    const serverId = need("server", "<server id>");
    const secret = need("secret", "rsec_...");
    const event = need("event", "registered");
    const eventFlags = EVENT_FLAGS[event];
    if (eventFlags === undefined) throw new CliError(`--event must be one of ${REFERRAL_EVENTS.join(", ")}`, { exitCode: EXIT_USAGE });
    const token = need("token", `<click token> (\`${CLI_RUN} clicks record --server ${serverId}\` prints one)`);
    const fields = Object.fromEntries(eventFlags.map((f) => [f.field, need(f.flag, f.example, ` for --event ${event} (the body's ${f.field})`)]));
    const reason = stringFlag(ctx.flags, "reason");
    if (reason !== undefined && event !== "reversed") throw new CliError("--reason goes with --event reversed", { exitCode: EXIT_USAGE });
    const body = JSON.stringify({
      event,
      server_id: serverId,
      token,
      ...fields,
      ...(reason === undefined ? {} : { reason }),
      server_event_id: stringFlag(ctx.flags, "id") ?? `${CLI_NAME}-${randomBytes(8).toString("hex")}`,
    });
    const t = Math.floor(Date.now() / 1000);
    const url = `${ctx.config().gatewayUrl}${INGEST_PATH}`;
    let response: Response;
    try {
      response = await fetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Service-Signature": formatIngestSignature(secret, t, body, stringFlag(ctx.flags, "kid")) },
        body,
        signal: AbortSignal.timeout(15_000),
      });
    } catch {
      // Failure policy: an unreachable gateway is reported with where it was looked for.
      throw new CliError(`cannot reach the gateway at ${ctx.config().gatewayUrl}`, {
        hint: "is `npm start` running? Otherwise pass --gateway-url or set GATEWAY_URL",
      });
    }
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Failure policy: a non-JSON answer is shown as text.
    }
    ctx.out.result({ status: response.status, body: parsed, request: JSON.parse(body) });
    ctx.out.line(
      formatPairs([
        ["status", `${response.status} ${response.statusText}`],
        ["body", text],
      ]),
    );
    if (!response.ok) {
      const error =
        typeof parsed === "object" && parsed !== null && typeof (parsed as { error?: unknown }).error === "string" ? (parsed as { error: string }).error : text;
      ctx.out.progress(`error: the ingest endpoint refused the event: ${response.status} "${error}"`);
      if (response.status === 401) ctx.out.progress(`  check the secret (\`${CLI_RUN} verify\` names the usual mistakes)`);
      if (error === ERROR_TEXT.unknownToken) ctx.out.progress(`  \`${CLI_RUN} clicks record --server ${serverId}\` prints a click token of this server`);
      return EXIT_FAILURE;
    }
    return EXIT_OK;
  },
};
