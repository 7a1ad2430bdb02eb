import { createHash, randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";

/**
 * A local emulator of the parts of Discord's HTTP API the service will use (issue 32), written from Discord's
 * published documentation (developers/topics/rate-limits, resources/webhook, resources/guild, resources/user,
 * resources/channel), so the service's Discord code and its tests cannot agree on the same mistake:
 *
 * - Execute Webhook `POST /webhooks/{id}/{token}[?wait=true]` (a message: 200 with it when `wait`, else 204) and Edit
 *   Webhook Message `PATCH /webhooks/{id}/{token}/messages/{message.id}`; a message needs content (at most 2,000
 *   characters) or embeds (at most 10);
 * - Add and Remove Guild Member Role `PUT|DELETE /guilds/{guild.id}/members/{user.id}/roles/{role.id}` (204), with a bot
 *   token (`Authorization: Bot <token>`) whose permission to manage roles the test sets;
 * - Create DM `POST /users/@me/channels` and Create Message `POST /channels/{channel.id}/messages`;
 * - rate limits as the documentation states them: per-route buckets counted per top-level resource (webhook id and
 *   token, guild id, channel id), a bucket id in `X-RateLimit-Bucket` that leaves the resource out, the
 *   `X-RateLimit-Limit`, `-Remaining`, `-Reset` (epoch seconds) and `-Reset-After` (seconds, with decimals) headers on
 *   every answer of a limited route; a shared per-channel limit on webhook messages (scope `shared`); the global limit
 *   of 50 requests a second per bot token (per address without one); a limit passed answers 429 with `Retry-After`
 *   (whole seconds), `{"message", "retry_after", "global"}`, `X-RateLimit-Scope` (`user`, `shared` or `global`) and,
 *   for the global limit, `X-RateLimit-Global: true`;
 * - the errors the documentation lists with their JSON codes (10015 Unknown Webhook, 10008 Unknown Message, 10007
 *   Unknown Member, 10011 Unknown Role, 50013 Missing Permissions, 50007 Cannot send messages to this user, 50006
 *   Cannot send an empty message, 50035 Invalid Form Body), and a count of invalid requests (401, 403 and 429 but
 *   429s of scope `shared`) as Discord counts them for its temporary bans.
 *
 * The limits' sizes are settings (Discord says not to hard-code them; the defaults are the commonly observed ones).
 * Time comes from `now()` (tests inject a clock), so a client's waits can be tested without sleeping. Every request is
 * recorded with its answer; `secondTooManyRequests()` finds a client that sent again into a bucket that had already
 * answered it 429 before the bucket reset (what a client obeying the headers never does).
 */

/** A limit: `limit` requests per `perMs`. */
export interface RateLimit {
  limit: number;
  perMs: number;
}

export interface DiscordEmulatorOptions {
  now?: () => number;
  /** Execute Webhook and Edit Webhook Message, per webhook (default 5 per 2 s). */
  webhookLimit?: RateLimit;
  /** Webhook messages per channel, shared by every webhook of the channel (default 30 per 60 s). */
  channelWebhookLimit?: RateLimit;
  /** Add/Remove Guild Member Role, per guild (default 10 per 10 s). */
  roleLimit?: RateLimit;
  /** Create DM (default 10 per 10 s per bot) and Create Message, per channel (default 5 per 5 s). */
  dmLimit?: RateLimit;
  messageLimit?: RateLimit;
  /** The global limit per bot token, or per address without one (default 50 per second). */
  globalLimit?: RateLimit;
}

/** A message the emulator stored. */
export interface DiscordMessage {
  id: string;
  channel_id: string;
  webhook_id?: string;
  content: string;
  embeds: unknown[];
  timestamp: string;
  edited_timestamp: string | null;
}

/** One request as it arrived, with its answer. */
export interface DiscordRequest {
  at: number;
  method: string;
  path: string;
  /** Who the global limit counts it for (`bot:<token>`, or `ip:<address>` without one). */
  identity?: string;
  /** The bucket key it was counted in (bucket id and resource), if its route is limited. */
  bucketKey?: string;
  status: number;
  /** 429s: the limit passed, and when it resets (epoch ms). */
  scope?: "user" | "shared" | "global";
  retryUntil?: number;
}

interface Window {
  remaining: number;
  resetAt: number;
}

interface Guild {
  members: Set<string>;
  roles: Set<string>;
  /** user id -> role ids */
  memberRoles: Map<string, Set<string>>;
  /** The bot tokens allowed to manage roles here. */
  managers: Set<string>;
}

/** A running emulator. */
export interface DiscordEmulator {
  /** `http://127.0.0.1:<port>/api/v10` */
  baseUrl: string;
  /** Creates an incoming webhook of `channelId`; its execute URL is `${baseUrl}/webhooks/${id}/${token}`. */
  createWebhook(channelId: string): { id: string; token: string; url: string };
  /** Creates a guild with `members` and `roles`; bot tokens in `managers` may manage its roles. */
  createGuild(guildId: string, opts: { members: string[]; roles: string[]; managers: string[] }): void;
  /** The role ids a member has now. */
  memberRoles(guildId: string, userId: string): string[];
  /** Users whose DMs are closed (Create Message in their DM channel answers 403, 50007). */
  closeDms(userId: string): void;
  /**
   * Makes Execute Webhook of webhook `id` answer `failure` from now on (a 5xx with no code, or a Discord error such as
   * 403 50013 Missing Permissions when the webhook's channel lost a permission); null answers normally again.
   */
  failWebhook(id: string, failure: { status: number; code?: number; message: string } | null): void;
  /** Messages stored per channel, oldest first. */
  messages(channelId: string): DiscordMessage[];
  requests: DiscordRequest[];
  /** Invalid requests as Discord counts them (401, 403, 429 but shared 429s). */
  invalidRequests(): number;
  /** Requests sent into a bucket that had answered 429 and not reset since: a client not obeying the headers. */
  secondTooManyRequests(): DiscordRequest[];
  close(): Promise<void>;
}

const DEFAULTS = {
  webhookLimit: { limit: 5, perMs: 2_000 },
  channelWebhookLimit: { limit: 30, perMs: 60_000 },
  roleLimit: { limit: 10, perMs: 10_000 },
  dmLimit: { limit: 10, perMs: 10_000 },
  messageLimit: { limit: 5, perMs: 5_000 },
  globalLimit: { limit: 50, perMs: 1_000 },
} satisfies Required<Omit<DiscordEmulatorOptions, "now">>;

/** Snowflake-like ids: increasing decimal strings. */
let snowflake = 1_200_000_000_000_000_000n;
const nextId = () => (snowflake++).toString();

/** The bucket id Discord names for a route template (a hash that leaves the top-level resource out). */
const bucketIdOf = (route: string) => createHash("sha256").update(route).digest("hex").slice(0, 16);

interface Answer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  scope?: "user" | "shared" | "global";
  bucketKey?: string;
  identity?: string;
  retryUntil?: number;
}

const error = (status: number, code: number, message: string): Answer => ({ status, body: { message, code } });

export async function startDiscordEmulator(options: DiscordEmulatorOptions = {}): Promise<DiscordEmulator> {
  const now = options.now ?? Date.now;
  const limits = { ...DEFAULTS, ...options };
  const windows = new Map<string, Window>();
  const webhooks = new Map<string, { token: string; channelId: string }>();
  const failingWebhooks = new Map<string, Answer>();
  const guilds = new Map<string, Guild>();
  const channels = new Map<string, DiscordMessage[]>();
  const dmChannels = new Map<string, string>(); // channel id -> recipient user id
  const closedDms = new Set<string>();
  const requests: DiscordRequest[] = [];

  /** Takes one request from the window of `key`; null when it is exhausted (and when it resets). */
  const take = (key: string, limit: RateLimit): { ok: boolean; window: Window } => {
    const t = now();
    let window = windows.get(key);
    if (window === undefined || t >= window.resetAt) {
      window = { remaining: limit.limit, resetAt: t + limit.perMs };
      windows.set(key, window);
    }
    if (window.remaining === 0) return { ok: false, window };
    window.remaining -= 1;
    return { ok: true, window };
  };

  const limitHeaders = (limit: RateLimit, window: Window, bucketId: string): Record<string, string> => {
    const resetAfter = Math.max(0, window.resetAt - now()) / 1000;
    return {
      "x-ratelimit-limit": String(limit.limit),
      "x-ratelimit-remaining": String(window.remaining),
      "x-ratelimit-reset": (window.resetAt / 1000).toFixed(3),
      "x-ratelimit-reset-after": resetAfter.toFixed(3),
      "x-ratelimit-bucket": bucketId,
    };
  };

  const tooMany = (retryMs: number, scope: "user" | "shared" | "global", headers: Record<string, string>): Answer => {
    const retryAfter = Math.max(0, retryMs) / 1000;
    return {
      status: 429,
      scope,
      retryUntil: now() + Math.max(0, retryMs),
      headers: {
        ...headers,
        "retry-after": String(Math.ceil(retryAfter)),
        "x-ratelimit-scope": scope,
        ...(scope === "global" ? { "x-ratelimit-global": "true" } : {}),
      },
      body: {
        message: scope === "shared" ? "The resource is being rate limited." : "You are being rate limited.",
        retry_after: Number(retryAfter.toFixed(3)),
        global: scope === "global",
      },
    };
  };

  /**
   * Runs `handler` under the global limit of `identity` and the route's limits (each `[route template, resource,
   * limit, scope]`, checked in order): a limit passed answers 429 and nothing is done.
   */
  const limitedCall = (identity: string, routes: Array<[string, string, RateLimit, "user" | "shared"]>, handler: () => Answer): Answer => {
    const global = take(`global:${identity}`, limits.globalLimit);
    if (!global.ok) return { ...tooMany(global.window.resetAt - now(), "global", {}), identity };
    let headers: Record<string, string> = {};
    let firstKey: string | undefined;
    for (const [route, resource, limit, scope] of routes) {
      const bucketId = bucketIdOf(route);
      const key = `${bucketId}:${resource}`;
      firstKey ??= key;
      const taken = take(key, limit);
      const h = limitHeaders(limit, taken.window, bucketId);
      if (scope === "user") headers = h;
      if (!taken.ok) {
        const answer = tooMany(taken.window.resetAt - now(), scope, scope === "user" ? h : { ...headers, ...h });
        return { ...answer, bucketKey: key, identity };
      }
    }
    const answer = handler();
    return { ...answer, identity, headers: { ...headers, ...answer.headers }, ...(firstKey === undefined ? {} : { bucketKey: firstKey }) };
  };

  const messageOf = (channelId: string, body: Record<string, unknown>, webhookId?: string): DiscordMessage | Answer => {
    const content = body.content;
    const embeds = body.embeds;
    if (content !== undefined && content !== null && typeof content !== "string")
      return {
        status: 400,
        body: {
          message: "Invalid Form Body",
          code: 50035,
          errors: { content: { _errors: [{ code: "MODEL_TYPE_CONVERT", message: "Could not interpret as string." }] } },
        },
      };
    if (typeof content === "string" && [...content].length > 2000)
      return {
        status: 400,
        body: {
          message: "Invalid Form Body",
          code: 50035,
          errors: { content: { _errors: [{ code: "BASE_TYPE_MAX_LENGTH", message: "Must be 2000 or fewer in length." }] } },
        },
      };
    if (embeds !== undefined && (!Array.isArray(embeds) || embeds.length > 10))
      return {
        status: 400,
        body: {
          message: "Invalid Form Body",
          code: 50035,
          errors: { embeds: { _errors: [{ code: "BASE_TYPE_MAX_LENGTH", message: "Must be 10 or fewer in length." }] } },
        },
      };
    if ((typeof content !== "string" || content === "") && (!Array.isArray(embeds) || embeds.length === 0))
      return error(400, 50006, "Cannot send an empty message");
    return {
      id: nextId(),
      channel_id: channelId,
      ...(webhookId === undefined ? {} : { webhook_id: webhookId }),
      content: typeof content === "string" ? content : "",
      embeds: Array.isArray(embeds) ? embeds : [],
      timestamp: new Date(now()).toISOString(),
      edited_timestamp: null,
    };
  };

  const store = (m: DiscordMessage) => {
    const list = channels.get(m.channel_id) ?? [];
    list.push(m);
    channels.set(m.channel_id, list);
  };

  const route = (method: string, path: string, query: URLSearchParams, auth: string | undefined, address: string, body: Record<string, unknown>): Answer => {
    const parts = path.split("/").filter(Boolean);
    const bot = auth?.startsWith("Bot ") ? auth.slice(4) : undefined;
    // Webhooks: authenticated by the token in the path; the global limit counts per address.
    if (parts[0] === "webhooks" && parts.length >= 3) {
      const [, id = "", token = ""] = parts;
      const hook = webhooks.get(id);
      const routes: Array<[string, string, RateLimit, "user" | "shared"]> = [["webhooks/{id}/{token}", `${id}/${token}`, limits.webhookLimit, "user"]];
      if (hook && hook.token === token) routes.push(["channel webhook messages", hook.channelId, limits.channelWebhookLimit, "shared"]);
      if (method === "POST" && parts.length === 3) {
        return limitedCall(`ip:${address}`, routes, () => {
          if (!hook || hook.token !== token) return error(404, 10015, "Unknown Webhook");
          const failure = failingWebhooks.get(id);
          if (failure) return failure;
          const made = messageOf(hook.channelId, body, id);
          if ("status" in made) return made;
          store(made);
          return query.get("wait") === "true" ? { status: 200, body: made } : { status: 204 };
        });
      }
      if (method === "PATCH" && parts.length === 5 && parts[3] === "messages") {
        return limitedCall(`ip:${address}`, routes.slice(0, 1), () => {
          if (!hook || hook.token !== token) return error(404, 10015, "Unknown Webhook");
          const message = channels.get(hook.channelId)?.find((m) => m.id === parts[4] && m.webhook_id === id);
          if (!message) return error(404, 10008, "Unknown Message");
          const edited = messageOf(hook.channelId, { content: body.content ?? message.content, embeds: body.embeds ?? message.embeds }, id);
          if ("status" in edited) return edited;
          Object.assign(message, { content: edited.content, embeds: edited.embeds, edited_timestamp: new Date(now()).toISOString() });
          return { status: 200, body: message };
        });
      }
    }
    if (bot === undefined) return error(401, 0, "401: Unauthorized");
    if (parts[0] === "guilds" && parts[2] === "members" && parts[4] === "roles" && parts.length === 6 && (method === "PUT" || method === "DELETE")) {
      const [, guildId = "", , userId = "", , roleId = ""] = parts;
      return limitedCall(`bot:${bot}`, [["guilds/{id}/members/{id}/roles/{id}", guildId, limits.roleLimit, "user"]], () => {
        const guild = guilds.get(guildId);
        if (!guild) return error(404, 10004, "Unknown Guild");
        if (!guild.managers.has(bot)) return error(403, 50013, "Missing Permissions");
        if (!guild.members.has(userId)) return error(404, 10007, "Unknown Member");
        if (!guild.roles.has(roleId)) return error(404, 10011, "Unknown Role");
        const roles = guild.memberRoles.get(userId) ?? new Set<string>();
        if (method === "PUT") roles.add(roleId);
        else roles.delete(roleId);
        guild.memberRoles.set(userId, roles);
        return { status: 204 };
      });
    }
    if (method === "POST" && path === "/users/@me/channels") {
      return limitedCall(`bot:${bot}`, [["users/@me/channels", bot, limits.dmLimit, "user"]], () => {
        const recipient = body.recipient_id;
        if (typeof recipient !== "string" || !/^\d{17,20}$/.test(recipient))
          return {
            status: 400,
            body: {
              message: "Invalid Form Body",
              code: 50035,
              errors: { recipient_id: { _errors: [{ code: "NUMBER_TYPE_COERCE", message: "Value is not snowflake." }] } },
            },
          };
        const existing = [...dmChannels].find(([, user]) => user === recipient)?.[0];
        const id = existing ?? nextId();
        dmChannels.set(id, recipient);
        return { status: 200, body: { id, type: 1, recipients: [{ id: recipient }] } };
      });
    }
    if (method === "POST" && parts[0] === "channels" && parts[2] === "messages" && parts.length === 3) {
      const channelId = parts[1] ?? "";
      return limitedCall(`bot:${bot}`, [["channels/{id}/messages", channelId, limits.messageLimit, "user"]], () => {
        const recipient = dmChannels.get(channelId);
        if (recipient === undefined && !channels.has(channelId)) return error(404, 10003, "Unknown Channel");
        if (recipient !== undefined && closedDms.has(recipient)) return error(403, 50007, "Cannot send messages to this user");
        const made = messageOf(channelId, body);
        if ("status" in made) return made;
        store(made);
        return { status: 200, body: made };
      });
    }
    return { status: 404, body: { message: "404: Not Found", code: 0 } };
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://emulator");
      const path = url.pathname.replace(/^\/api(\/v\d+)?/, "");
      let body: Record<string, unknown> = {};
      let answer: Answer;
      try {
        const text = Buffer.concat(chunks).toString("utf8");
        body = text === "" ? {} : (JSON.parse(text) as Record<string, unknown>);
        answer = route(req.method ?? "GET", path, url.searchParams, req.headers.authorization, req.socket.remoteAddress ?? "", body);
      } catch {
        // Failure policy: a body that is not JSON is the client's error, answered as Discord does (50109).
        answer = error(400, 50109, "The request body contains invalid JSON.");
      }
      requests.push({
        at: now(),
        method: req.method ?? "GET",
        path,
        status: answer.status,
        ...(answer.identity === undefined ? {} : { identity: answer.identity }),
        ...(answer.bucketKey === undefined ? {} : { bucketKey: answer.bucketKey }),
        ...(answer.scope === undefined ? {} : { scope: answer.scope }),
        ...(answer.retryUntil === undefined ? {} : { retryUntil: answer.retryUntil }),
      });
      const headers = { ...answer.headers, ...(answer.body === undefined ? {} : { "content-type": "application/json" }) };
      res.writeHead(answer.status, headers);
      res.end(answer.body === undefined ? undefined : JSON.stringify(answer.body));
    });
  });
  const sockets = new Set<Socket>();
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const baseUrl = `http://127.0.0.1:${port}/api/v10`;

  return {
    baseUrl,
    createWebhook(channelId) {
      const id = nextId();
      const token = randomBytes(34).toString("base64url");
      webhooks.set(id, { token, channelId });
      if (!channels.has(channelId)) channels.set(channelId, []);
      return { id, token, url: `${baseUrl}/webhooks/${id}/${token}` };
    },
    failWebhook(id, failure) {
      if (failure === null) failingWebhooks.delete(id);
      else
        failingWebhooks.set(
          id,
          failure.code === undefined ? { status: failure.status, body: { message: failure.message } } : error(failure.status, failure.code, failure.message),
        );
    },
    createGuild(guildId, opts) {
      guilds.set(guildId, { members: new Set(opts.members), roles: new Set(opts.roles), memberRoles: new Map(), managers: new Set(opts.managers) });
    },
    memberRoles: (guildId, userId) => [...(guilds.get(guildId)?.memberRoles.get(userId) ?? [])].sort(),
    closeDms: (userId) => void closedDms.add(userId),
    messages: (channelId) => [...(channels.get(channelId) ?? [])],
    requests,
    invalidRequests: () => requests.filter((r) => r.status === 401 || r.status === 403 || (r.status === 429 && r.scope !== "shared")).length,
    secondTooManyRequests() {
      // A request into a bucket after a 429 of that bucket and before its reset; after a global 429, any request of
      // the same identity before its reset.
      const bucketUntil = new Map<string, number>();
      const identityUntil = new Map<string, number>();
      const offenders: DiscordRequest[] = [];
      for (const r of requests) {
        const early =
          (r.bucketKey !== undefined && r.at < (bucketUntil.get(r.bucketKey) ?? 0)) ||
          (r.identity !== undefined && r.at < (identityUntil.get(r.identity) ?? 0));
        if (early) offenders.push(r);
        if (r.status !== 429 || r.retryUntil === undefined) continue;
        if (r.scope === "global" && r.identity !== undefined) identityUntil.set(r.identity, r.retryUntil);
        else if (r.bucketKey !== undefined) bucketUntil.set(r.bucketKey, r.retryUntil);
      }
      return offenders;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
