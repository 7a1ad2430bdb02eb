/**
 * The commands that need no service token: `sign` and `verify` (both signature schemes, with the
 * dashboard debugger's own logic, gateway/dashboard/static/signature-check.js, and the rules built
 * from the gateway's constants) and `events send` (a signed ingest event to the public gateway).
 */
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { SIGNATURE_RULES } from "../../../gateway/dashboard/signature-rules.js";
import { checkSignature, createMacEngine, type Finding, type Scheme } from "../../../gateway/dashboard/static/signature-check.js";
import { INGEST_PATH } from "../../../services/shared/contract.js";
import {
  SIGNATURE_TOLERANCE_SECONDS,
  formatCallbackSignature,
  formatIngestSignature,
  formatStandardWebhookSignature,
} from "../../../services/shared/signature.js";
import { stringFlag, type Command, type CommandContext } from "../command.js";
import { CLI_NAME } from "../name.js";
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
    `echo -n '{"event":"registered",...}' | ${CLI_NAME} sign --secret rsec_...`,
    `${CLI_NAME} sign --secret whsec_... --body-file body.json --t 1700000000`,
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
  examples: [`${CLI_NAME} verify --header 't=1700000000,v1=5f2c...' --secret whsec_... --body-file body.json`],
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
    ctx.out.result({
      valid,
      scheme,
      verdict: report.verdict,
      standard_webhooks_valid: webhookValid ?? null,
      canonical: report.canonical,
      expected_header: report.expectedHeader,
      service_answer: report.answer,
      findings,
    });
    ctx.out.line(`${valid ? "VALID" : report.verdict.toUpperCase()}  (${scheme} scheme)`);
    for (const f of findings) ctx.out.line(`  ${MARK[f.level]}  ${f.part.padEnd(6)}  ${f.message}`);
    if (report.expectedHeader) ctx.out.line(`\n  expected  ${report.expectedHeader}`);
    if (report.answer) ctx.out.line(`  the gateway would answer ${report.answer.status} "${report.answer.error}"`);
    return valid ? EXIT_OK : EXIT_FAILURE;
  },
};

const REFERRAL_EVENTS = ["registered", "qualified", "reversed"];

export const eventsSend: Command = {
  name: "events send",
  summary: "send a signed referral event to the gateway's public ingest endpoint",
  usage: "--server ID --secret rsec_... --event registered|qualified|reversed --token T [--referee R] [--id SERVER_EVENT_ID] [--kid KID]",
  flagHelp: [
    ["--server ID", "the server the event is for"],
    ["--secret rsec_...", "the server's referral secret"],
    ["--event E", "registered, qualified or reversed"],
    ["--token T", "the click token the referral link gave the player"],
    ["--referee R", "the referred player's identity (required for registered)"],
    ["--id ID", "server_event_id, your idempotency key (default: a random one)"],
    ["--kid KID", "name the secret's key id in the header"],
  ],
  flags: {
    server: { type: "string" },
    secret: { type: "string" },
    event: { type: "string" },
    token: { type: "string" },
    referee: { type: "string" },
    id: { type: "string" },
    kid: { type: "string" },
  },
  examples: [`${CLI_NAME} events send --server 0b7c... --secret rsec_... --event registered --token tok_... --referee player-1`],
  async run(ctx) {
    // --token here is the click token, not the service token: this command talks only to the public gateway.
    const need = (name: string, example: string) => {
      const value = stringFlag(ctx.flags, name);
      if (value === undefined) throw new CliError(`--${name} is required`, { hint: `for example --${name} ${example}`, exitCode: EXIT_USAGE });
      return value;
    };
    const serverId = need("server", "<server id>");
    const secret = need("secret", "rsec_...");
    const event = need("event", "registered");
    if (!REFERRAL_EVENTS.includes(event)) throw new CliError(`--event must be one of ${REFERRAL_EVENTS.join(", ")}`, { exitCode: EXIT_USAGE });
    const body = JSON.stringify({
      event,
      server_id: serverId,
      token: need("token", "<click token>"),
      ...(stringFlag(ctx.flags, "referee") ? { referee_identity: stringFlag(ctx.flags, "referee") } : {}),
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
      ctx.out.progress(
        response.status === 401
          ? `The signature was refused: check the secret (\`${CLI_NAME} verify\` names the usual mistakes).`
          : "The event was not accepted.",
      );
      return EXIT_FAILURE;
    }
    return EXIT_OK;
  },
};
