/**
 * The commands that call the referral service's RPCs with the service token: `servers create`,
 * `servers list`, `hearts cast`, `login-link` and `trigger`.
 */
import { randomBytes } from "node:crypto";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { HeartVerdict } from "../../../gen/proto/hearts/v1/hearts_pb.js";
import { ReferralEventType } from "../../../gen/proto/referral/v1/referral_pb.js";
import { REFERRAL_EVENT_TYPES } from "../../../services/shared/values/event-types.js";
import type { Server } from "../../../gen/proto/servers/v1/servers_pb.js";
import { stringFlag, type Command, type CommandContext } from "../command.js";
import { CliError, EXIT_OK, EXIT_USAGE, formatPairs } from "../output.js";
import { callRpc, createClients } from "../rpc.js";
import { CLI_NAME, CLI_RUN } from "../name.js";

/** The owner `npm start` seeds with the demo server. */
const DEMO_OWNER_ID = "demo-owner";
/** The username of test hearts, as the dashboard's "Send test callback" uses. */
const TEST_USERNAME = "TestPlayer";

const VERDICT_NAMES: Record<number, string> = {
  [HeartVerdict.COUNTED]: "counted",
  [HeartVerdict.COOLDOWN]: "cooldown",
  [HeartVerdict.FRAUD]: "fraud",
};

function requireFlag(ctx: CommandContext, name: string, example: string): string {
  const value = stringFlag(ctx.flags, name);
  if (value === undefined) throw new CliError(`--${name} is required`, { hint: `for example --${name} ${example}`, exitCode: EXIT_USAGE });
  return value;
}

/** A random address of 2001:db8::/32 (documentation range), its own /64: a fresh voter that trips no per-IP fraud rule. */
function randomTestIp(): string {
  const groups = [...randomBytes(12)].reduce<string[]>((acc, byte, i) => {
    if (i % 2 === 0) acc.push(byte.toString(16).padStart(2, "0"));
    else acc[acc.length - 1] += byte.toString(16).padStart(2, "0");
    return acc;
  }, []);
  return `2001:db8:${groups.join(":")}`;
}

function serverJson(s: Server) {
  return {
    server_id: s.id,
    name: s.name,
    referrals_enabled: s.referralsEnabled,
    callback_url: s.callbackUrl || null,
    standard_webhooks: s.standardWebhooks,
    callback_disabled_reason: s.callbackDisabledReason || null,
    pull_enabled: s.pullEnabled,
    votifier: s.votifierHost ? `${s.votifierHost}:${s.votifierPort}` : null,
    owner_id: s.ownerId || null,
    created_at: s.createdAt ? timestampDate(s.createdAt).toISOString() : null,
  };
}

export const serversCreate: Command = {
  name: "servers create",
  summary: "create a server with referrals, a referral secret, a callback secret and the pull API, in one step",
  usage: "[--name NAME] [--callback-url URL] [--standard-webhooks] [--registration-url URL] [--owner ID]",
  flagHelp: [
    ["--name NAME", 'the server\'s name (default "Test Server")'],
    ["--callback-url URL", "where the service POSTs signed callbacks (https; a receiver on this machine: leave it out and use `listen`)"],
    ["--standard-webhooks", "also sign callbacks with the Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature)"],
    ["--registration-url URL", "where referral links send players"],
    ["--owner ID", "assign the server to this owner (an account id of the list; created when missing)"],
  ],
  flags: {
    name: { type: "string" },
    "callback-url": { type: "string" },
    "standard-webhooks": { type: "boolean" },
    "registration-url": { type: "string" },
    owner: { type: "string" },
  },
  examples: [`${CLI_RUN} servers create --name "My Server"`, `${CLI_RUN} servers create --callback-url https://example.com/hooks/hearts --json`],
  async run(ctx) {
    const config = ctx.config();
    const { admin, access } = createClients(config);
    const name = stringFlag(ctx.flags, "name") ?? "Test Server";
    const callbackUrl = stringFlag(ctx.flags, "callback-url");
    const owner = stringFlag(ctx.flags, "owner");
    const step = (text: string) => ctx.out.progress(`  ${text}`);

    const created = await callRpc(config, "creating the server", (o) =>
      admin.createServer({ name, registrationUrl: stringFlag(ctx.flags, "registration-url") ?? "" }, o),
    );
    const serverId = created.server!.id;
    step(`created server ${serverId}`);
    // From here on a failure leaves a server behind: say which, so the user can finish or retry on it.
    const onServer = async <T>(what: string, fn: (o: { timeoutMs: number }) => Promise<T>): Promise<T> => {
      try {
        return await callRpc(config, what, fn);
      } catch (error) {
        // Failure policy: report the half-done set-up with the server's id; nothing is rolled back.
        if (!(error instanceof CliError)) throw error;
        throw new CliError(`${error.message}`, {
          hint: `server ${serverId} was created; the steps before this one are done.${error.hint ? ` ${error.hint}` : ""}${
            what.includes("callback URL") ? ` A receiver on this machine: leave --callback-url out and run \`${CLI_RUN} listen --forward-to URL\`.` : ""
          }`,
        });
      }
    };
    await onServer("turning referrals on", (o) => admin.setReferralsEnabled({ serverId, enabled: true }, o));
    step("referrals on");
    const referral = await onServer("creating the referral secret", (o) => admin.createReferralSecret({ serverId }, o));
    step(`referral secret ${referral.info?.kid ?? ""} created`);
    let callbackSecret: string;
    if (callbackUrl) {
      await onServer("setting the callback URL", (o) =>
        admin.setCallbackSettings({ serverId, callbackUrl, standardWebhooks: ctx.flags["standard-webhooks"] === true }, o),
      );
      // SetCallbackSettings creates the callback secret without returning it: reveal it once here.
      callbackSecret = (await onServer("revealing the callback secret", (o) => admin.revealCallbackSecret({ serverId }, o))).secret;
      step(`callback URL set; callback secret created`);
    } else {
      if (ctx.flags["standard-webhooks"] === true) {
        await onServer("turning Standard Webhooks on", (o) => admin.setCallbackSettings({ serverId, callbackUrl: "", standardWebhooks: true }, o));
      }
      // No URL: the callback secret still signs what `listen` forwards, exactly as a callback would be signed.
      callbackSecret = (await onServer("creating the callback secret", (o) => admin.rotateCallbackSecret({ serverId }, o))).secret;
      step("callback secret created (no callback URL: use `listen` to receive hearts locally)");
    }
    await onServer("turning the pull API on", (o) => admin.setPullEnabled({ serverId, enabled: true }, o));
    const pullSecret = (await onServer("revealing the pull secret", (o) => admin.revealPullSecret({ serverId }, o))).secret;
    step("pull API on; pull secret created");
    if (owner) {
      await onServer("creating the owner", (o) =>
        access.createOwner({ ownerId: owner, displayName: owner }, o).catch((error: unknown) => {
          // Failure policy: an owner that already exists is the one meant; anything else is reported.
          if (ConnectError.from(error).code === Code.AlreadyExists) return undefined;
          throw error;
        }),
      );
      await onServer("assigning the owner", (o) => access.assignServer({ serverId, ownerId: owner }, o));
      step(`assigned to owner ${owner}`);
    }
    const server = (await onServer("reading the server back", (o) => admin.getServer({ serverId }, o))).server!;

    const secrets = { referral_secret: referral.secret, callback_secret: callbackSecret, pull_secret: pullSecret };
    ctx.out.result({ server: serverJson(server), secrets });
    ctx.out.line(`Server "${server.name}" is ready. The secrets are shown only now: store them.\n`);
    ctx.out.line(
      formatPairs([
        ["server_id", server.id],
        ["callback_url", server.callbackUrl || "(none: use `listen` for a receiver on this machine)"],
        ["referral_secret", `${referral.secret}   signs referral events (events send)`],
        ["callback_secret", `${callbackSecret}   verifies callbacks (X-Service-Signature)`],
        ["pull_secret", `${pullSecret}   signs pull API requests (listen)`],
      ]),
    );
    ctx.out.line(
      `\nNext:\n  ${CLI_RUN} listen --server ${server.id} --forward-to http://localhost:3000/hook\n  ${CLI_RUN} trigger heart.counted --server ${server.id}`,
    );
    return EXIT_OK;
  },
};

export const serversList: Command = {
  name: "servers list",
  summary: "list the servers",
  usage: "",
  flagHelp: [],
  flags: {},
  async run(ctx) {
    const config = ctx.config();
    const { servers } = await callRpc(config, "listing servers", (o) => createClients(config).admin.listServers({}, o));
    ctx.out.result({ servers: servers.map(serverJson) });
    if (servers.length === 0) ctx.out.line(`No servers yet: \`${CLI_RUN} servers create\` makes one.`);
    ctx.out.table(
      ["ID", "NAME", "REFERRALS", "CALLBACK", "PULL", "OWNER"],
      servers.map((s) => [
        s.id,
        s.name,
        s.referralsEnabled ? "on" : "off",
        s.callbackDisabledReason ? `disabled (${s.callbackUrl})` : s.callbackUrl || "-",
        s.pullEnabled ? "on" : "off",
        s.ownerId || "-",
      ]),
    );
    return EXIT_OK;
  },
};

/** CastHeart's optional platform ids, flag -> request field (the service checks each format and names the field when one is malformed). */
const PLATFORM_ID_FLAGS = {
  "steam-id": "steamId",
  "discord-id": "discordId",
  "minecraft-uuid": "minecraftUuid",
  "account-id": "accountId",
} as const;

type PlatformIdsInput = Partial<Record<(typeof PLATFORM_ID_FLAGS)[keyof typeof PLATFORM_ID_FLAGS], string>>;

function readPlatformIds(ctx: CommandContext): PlatformIdsInput {
  const ids: PlatformIdsInput = {};
  for (const [flag, field] of Object.entries(PLATFORM_ID_FLAGS)) {
    const value = stringFlag(ctx.flags, flag);
    if (value !== undefined) ids[field] = value;
  }
  return ids;
}

async function castHeart(ctx: CommandContext, input: { serverId: string; username: string; voter: string; ip: string; ids?: PlatformIdsInput }) {
  const config = ctx.config();
  const hearts = createClients(config).hearts;
  const r = await callRpc(config, "casting the heart", (o) =>
    hearts.castHeart(
      { serverId: input.serverId, username: input.username, voterIdentity: input.voter, ip: input.ip, userAgent: `${CLI_NAME}-cli`, ...input.ids },
      o,
    ),
  );
  const verdict = VERDICT_NAMES[r.verdict] ?? "unknown";
  const givenIds = Object.entries(PLATFORM_ID_FLAGS).flatMap(([flag, field]) => (input.ids?.[field] ? [[flag, input.ids[field]] as const] : []));
  const json = {
    heart_id: r.heartId,
    counted: r.counted,
    verdict,
    reason: r.reason || null,
    fraud_score: r.fraudScore,
    fraud_reasons: r.fraudReasons,
    period: r.period || null,
    streak_day: r.streakDay || null,
    next_eligible_at: r.nextEligibleAt > 0n ? new Date(Number(r.nextEligibleAt) * 1000).toISOString() : null,
    undeliverable: r.undeliverable.map((u) => ({ transport: u.transport, reason: u.reason })),
    voter_identity: input.voter,
    ip: input.ip,
    platform_ids: Object.fromEntries(givenIds.map(([flag, value]) => [flag.replace("-", "_"), value])),
  };
  ctx.out.result(json);
  const pairs: [string, string][] = [
    ["heart_id", r.heartId],
    ["verdict", `${verdict}${r.reason && r.reason !== verdict ? ` (${r.reason})` : ""}`],
    ["username", input.username],
    ["voter", `${input.voter} from ${input.ip}`],
    ...givenIds.map(([flag, value]) => [flag.replace("-", "_"), value] as [string, string]),
  ];
  if (r.counted) pairs.push(["period", r.period], ["streak_day", String(r.streakDay)]);
  if (r.fraudScore > 0) pairs.push(["fraud_score", `${r.fraudScore} (${r.fraudReasons.join(", ")})`]);
  for (const u of r.undeliverable) pairs.push([`not by ${u.transport}`, u.reason]);
  ctx.out.line(formatPairs(pairs));
  return r;
}

export const heartsCast: Command = {
  name: "hearts cast",
  summary: "cast a heart (a vote) through HeartService.CastHeart",
  usage: "--server ID --username NAME [--voter ID] [--ip ADDRESS] [--steam-id ID] [--discord-id ID] [--minecraft-uuid UUID] [--account-id ID]",
  flagHelp: [
    ["--server ID", "the server voted for"],
    ["--username NAME", "the in-game name: the reward's recipient"],
    ["--voter ID", "the voter's stable identity on the list (default: cli:<username>)"],
    ["--ip ADDRESS", "the voter's IP address (default: a random 2001:db8:: documentation address)"],
    ["--steam-id ID", "the voter's SteamID64 (17 digits), what Rust and Unturned plugins check and claim by"],
    ["--discord-id ID", "the voter's Discord user id (17 to 20 digits)"],
    ["--minecraft-uuid UUID", "the voter's Minecraft account UUID (with or without dashes)"],
    ["--account-id ID", "the voter's game account id, passed through from the vote link"],
  ],
  flags: {
    server: { type: "string" },
    username: { type: "string" },
    voter: { type: "string" },
    ip: { type: "string" },
    "steam-id": { type: "string" },
    "discord-id": { type: "string" },
    "minecraft-uuid": { type: "string" },
    "account-id": { type: "string" },
  },
  examples: [
    `${CLI_RUN} hearts cast --server 0b7c... --username Steve`,
    `${CLI_RUN} hearts cast --server 0b7c... --username Steve --steam-id 76561197960287930`,
  ],
  async run(ctx) {
    const serverId = requireFlag(ctx, "server", "<server id from `servers list`>");
    const username = requireFlag(ctx, "username", "Steve");
    await castHeart(ctx, {
      serverId,
      username,
      voter: stringFlag(ctx.flags, "voter") ?? `cli:${username}`,
      ip: stringFlag(ctx.flags, "ip") ?? randomTestIp(),
      ids: readPlatformIds(ctx),
    });
    return EXIT_OK;
  },
};

/** The referrer of clicks recorded without --referrer. */
const DEFAULT_REFERRER = "cli:referrer";

export const clicksRecord: Command = {
  name: "clicks record",
  summary: "record a referral click (ReferralService.RecordClick, as a referral link does) and print its token",
  usage: "--server ID [--referrer IDENTITY] [--ip ADDRESS]",
  flagHelp: [
    ["--server ID", "the server the link is for (its referrals must be on)"],
    ["--referrer IDENTITY", `the referrer's player identity on the list (default ${DEFAULT_REFERRER})`],
    ["--ip ADDRESS", "the visitor's IP address (default: a random 2001:db8:: documentation address)"],
  ],
  flags: { server: { type: "string" }, referrer: { type: "string" }, ip: { type: "string" } },
  examples: [
    `${CLI_RUN} clicks record --server 0b7c...`,
    `${CLI_RUN} events send --server 0b7c... --secret rsec_... --event registered --token=<token> --referee player-1`,
  ],
  async run(ctx) {
    const serverId = requireFlag(ctx, "server", "<server id from `servers list`>");
    const referrer = stringFlag(ctx.flags, "referrer") ?? DEFAULT_REFERRER;
    const config = ctx.config();
    const r = await callRpc(
      config,
      "recording the click",
      (o) =>
        createClients(config).referral.recordClick(
          { serverId, referrerIdentity: referrer, ip: stringFlag(ctx.flags, "ip") ?? randomTestIp(), userAgent: `${CLI_NAME}-cli` },
          o,
        ),
      { notFound: `check the server id and that its referrals are on (\`${CLI_RUN} servers list\` shows both)` },
    );
    ctx.out.result({ token: r.token, click_id: r.clickId, redirect_url: r.redirectUrl || null, referrer_identity: referrer });
    ctx.out.line(
      formatPairs([
        ["token", r.token],
        ["click_id", r.clickId],
        ["referrer", referrer],
        ...(r.redirectUrl ? ([["redirect_url", r.redirectUrl]] as [string, string][]) : []),
      ]),
    );
    ctx.out.progress(
      `Register a player with it: ${CLI_RUN} events send --server ${serverId} --secret rsec_... --event registered --token=${r.token} --referee <player id>`,
    );
    return EXIT_OK;
  },
};

export const loginLink: Command = {
  name: "login-link",
  summary: "mint a one-time dashboard login link for an owner",
  usage: "[--owner ID] [--ttl SECONDS]",
  flagHelp: [
    ["--owner ID", `the owner's account id (default ${DEMO_OWNER_ID}, the owner \`npm start\` seeds)`],
    ["--ttl SECONDS", "how long the link stays valid (default 300, at most 3600)"],
  ],
  flags: { owner: { type: "string" }, ttl: { type: "string" } },
  async run(ctx) {
    const ownerId = stringFlag(ctx.flags, "owner") ?? DEMO_OWNER_ID;
    const ttlText = stringFlag(ctx.flags, "ttl");
    const ttl = ttlText === undefined ? 0 : Number(ttlText);
    if (!Number.isInteger(ttl) || ttl < 0)
      throw new CliError("--ttl must be a whole number of seconds", { hint: "for example --ttl 600", exitCode: EXIT_USAGE });
    const config = ctx.config();
    const r = await callRpc(
      config,
      "minting the login link",
      (o) => createClients(config).access.createDashboardLoginLink({ ownerId, ttlSeconds: BigInt(ttl) }, o),
      { notFound: `no owner "${ownerId}": owners are the list's account ids (\`${CLI_RUN} servers create --owner ID\` creates one)` },
    );
    const expiresAt = r.expiresAt ? timestampDate(r.expiresAt).toISOString() : null;
    ctx.out.result({ owner_id: ownerId, url: r.url, expires_at: expiresAt });
    ctx.out.line(r.url);
    ctx.out.progress(`Opens the dashboard as ${ownerId} once${expiresAt ? `, until ${expiresAt}` : ""}.`);
    return EXIT_OK;
  },
};

const TRIGGERS = ["heart.test", "heart.counted", ...REFERRAL_EVENT_TYPES];

/** The transitions a test referral goes through to reach each referral event. */
const REFERRAL_STEPS = {
  "referral.registered": ["registered"],
  "referral.qualified": ["registered", "qualified"],
  "referral.reversed": ["registered", "reversed"],
} as const;

const REFERRAL_EVENT_ENUM = {
  registered: ReferralEventType.REGISTERED,
  qualified: ReferralEventType.QUALIFIED,
  reversed: ReferralEventType.REVERSED,
} as const;

export const trigger: Command = {
  name: "trigger",
  summary: "send a test event through the real pipeline",
  usage: "<heart.test | heart.counted | referral.registered | referral.qualified | referral.reversed> --server ID [--username NAME]",
  flagHelp: [
    ["--server ID", "the server"],
    ["--username NAME", `the test player (default ${TEST_USERNAME})`],
  ],
  flags: { server: { type: "string" }, username: { type: "string" } },
  examples: [`${CLI_RUN} trigger heart.counted --server 0b7c...`, `${CLI_RUN} trigger heart.test --server 0b7c...`],
  async run(ctx) {
    const event = stringFlag(ctx.flags, "_event");
    if (event === undefined || !TRIGGERS.includes(event)) {
      throw new CliError(event === undefined ? "which event? name one" : `unknown event "${event}"`, {
        hint: `one of: ${TRIGGERS.join(", ")}`,
        exitCode: EXIT_USAGE,
      });
    }
    const serverId = requireFlag(ctx, "server", "<server id from `servers list`>");
    const username = stringFlag(ctx.flags, "username") ?? TEST_USERNAME;
    const config = ctx.config();
    if (event === "heart.counted") {
      // A fresh voter and address every time: the heart counts (no cooldown, no fraud rule) and goes out over every transport.
      ctx.out.progress(`Casting a heart for ${username} from a fresh test voter...`);
      const r = await castHeart(ctx, { serverId, username, voter: `${CLI_NAME}-test-${randomBytes(6).toString("hex")}`, ip: randomTestIp() });
      if (!r.counted) throw new CliError(`the heart did not count: ${r.reason || VERDICT_NAMES[r.verdict]}`);
      ctx.out.progress("It goes out to the callback URL, the Votifier listener and the pull API (`listen` forwards it), as a real vote does.");
      return EXIT_OK;
    }
    const { delivery } = createClients(config);
    if (event === "heart.test") {
      ctx.out.progress("Sending a heart.test callback...");
      const r = await callRpc(config, "sending the test callback", (o) => delivery.sendTestCallback({ serverId, username }, o), {
        failedPrecondition: `heart.test goes to the server's callback URL only (\`${CLI_RUN} servers create --callback-url URL\`); with \`listen\`, use \`${CLI_RUN} trigger heart.counted\``,
      });
      const report = r.report!;
      ctx.out.result({
        url: report.url,
        ok: report.ok,
        status: report.statusCode || null,
        latency_ms: report.latencyMs,
        error: report.error || null,
        response_body: report.responseBody,
        delivery_id: r.delivery?.id ?? null,
      });
      ctx.out.line(
        formatPairs([
          ["url", report.url],
          ["status", report.statusCode ? String(report.statusCode) : "no answer"],
          ["latency", `${report.latencyMs} ms`],
          ...(report.error ? ([["error", report.error]] as [string, string][]) : []),
          ["delivery", `${r.delivery?.id ?? "-"} (retried like any callback until a 2xx)`],
        ]),
      );
      if (!report.ok)
        throw new CliError(`the receiver did not accept the test callback${report.error ? `: ${report.error}` : ` (status ${report.statusCode})`}`);
      return EXIT_OK;
    }
    const { admin, referral } = createClients(config);
    const endpoints = await callRpc(config, "reading the server's endpoints", (o) => admin.listEndpoints({ serverId }, o), {
      notFound: `no server ${serverId} (\`${CLI_RUN} servers list\`)`,
    });
    const subscribed = endpoints.endpoints.filter((e) => e.eventTypes.includes(event) && e.url !== "");
    if (subscribed.length > 0) {
      // A real referral through the pipeline: a click, then the transitions up to the event, each delivered to the endpoints subscribed to it.
      const steps = REFERRAL_STEPS[event as keyof typeof REFERRAL_STEPS];
      const suffix = randomBytes(6).toString("hex");
      ctx.out.progress(`Recording a test click and applying ${steps.join(" -> ")} for a fresh test referee...`);
      const { token } = await callRpc(config, "recording a test click", (o) =>
        referral.recordClick({ serverId, referrerIdentity: `${CLI_NAME}-test-referrer` }, o),
      );
      let referralId = "";
      for (const step of steps) {
        const r = await callRpc(config, `applying ${step}`, (o) =>
          referral.applyEvent(
            {
              serverId,
              event: REFERRAL_EVENT_ENUM[step],
              token,
              refereeIdentity: `${CLI_NAME}-test-${suffix}`,
              serverEventId: `${CLI_NAME}-${step}-${suffix}`,
            },
            o,
          ),
        );
        if (r.outcome.case === "applied") referralId = r.outcome.value.referralId;
      }
      ctx.out.result({ event, referral_id: referralId, endpoints: subscribed.map((e) => e.url) });
      ctx.out.line(formatPairs([["event", event], ["referral", referralId], ...subscribed.map((e) => ["endpoint", e.url] as [string, string])]));
      ctx.out.progress("It goes out, signed, to every endpoint subscribed to it, as a real referral's event does.");
      return EXIT_OK;
    }
    // No endpoint receives this event: the service's signed test event to its own public ingest endpoint instead.
    // referral.*: the service's signed test event to its own public ingest endpoint (the owner gets no referral events yet).
    const kind = event.slice("referral.".length);
    ctx.out.progress(`Sending a signed test ${kind} event to the gateway's ingest endpoint...`);
    const r = await callRpc(config, "sending the test referral event", (o) => delivery.sendTestReferralEvent({ serverId, event: kind }, o));
    const report = r.report!;
    ctx.out.result({ url: report.url, ok: report.ok, status: report.statusCode || null, response_body: report.responseBody, error: report.error || null });
    ctx.out.line(
      formatPairs([
        ["url", report.url],
        ["status", report.statusCode ? String(report.statusCode) : "no answer"],
        ["response", report.responseBody || report.error],
      ]),
    );
    ctx.out.progress(`No endpoint of this server receives ${event} (CreateEndpoint with that event type), so this checks the ingest path only.`);
    if (!report.ok) throw new CliError(`the ingest endpoint refused the test event (status ${report.statusCode || "none"})`);
    return EXIT_OK;
  },
};
