import { sendJson as writeJson } from "../../services/shared/runtime/send-json.js";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { IncomingMessage, ServerResponse } from "node:http";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type CallOptions, type Client, type Transport } from "@connectrpc/connect";
import type { AccessService } from "../../gen/proto/access/v1/access_pb.js";
import { DASHBOARD_LOGIN_PATH } from "../../services/shared/values/wire.js";
import type { Logger } from "../../services/shared/runtime/log.js";
import { errorReply, type HttpReply } from "../http-errors.js";
import { declaresTooLarge, readRawBody } from "../raw-body.js";
import { REQUEST_ID_HEADER } from "../request-id.js";
import { DASHBOARD_RPC_TIMEOUT_MS, TEST_SEND_RPC_TIMEOUT_MS, checkOwnerParams, matchApiRoute, toApiError, type ApiRequest, type Viewer } from "./api.js";
import { SESSION_COOKIE, checkCsrf, csrfTokenFor, readCookie, sessionCookie, clearedSessionCookie, isAuthorized } from "./auth.js";
import { createAccessClient, createDashboardClients, createSessionClients, type DashboardClients } from "./clients.js";
import { SIGNATURE_RULES } from "./signature-rules.js";

/** Where the page lives. */
export const DASHBOARD_PATH = "/dashboard";
/** Prefix of the JSON API the page calls. */
export const DASHBOARD_API_PREFIX = "/dashboard/api";
/** Largest JSON body the dashboard API reads. */
export const MAX_DASHBOARD_BODY_BYTES = 16_384;

/** Path that signs out an owner's session (POST, CSRF-checked). */
export const LOGOUT_API_PATH = "/session/logout";

/** What the dashboard needs; built in gateway/main.ts, scripts/start.ts or a test. */
export interface DashboardDeps {
  /**
   * The referral service, with the gateway's service token (services/shared/rpc/service-transport.ts).
   * It needs the scope `dashboard` for owners' sessions and `admin` for the operator.
   */
  transport: Transport;
  /** DASHBOARD_TOKEN: the operator's bearer token (sees every server); empty or undefined: no operator sign-in. */
  token: string | undefined;
  /** Mark the session cookie Secure (the public base URL is https). */
  secureCookies?: boolean;
  log: Logger;
  /** Clock for "this month"; default the wall clock. */
  now?: () => Date;
}

interface StaticAsset {
  contentType: string;
  body: Buffer;
}

const readStatic = (name: string) => readFileSync(new URL(`./static/${name}`, import.meta.url));

/**
 * Chart.js's self-contained browser build, served by the gateway itself (no CDN). Resolved
 * through Node's module resolution, so it is found from the sources and from a compiled build.
 */
const readChartJs = () => readFileSync(join(dirname(createRequire(import.meta.url).resolve("chart.js")), "chart.umd.min.js"));

const JS = "text/javascript; charset=utf-8";

/** The page and its assets: plain files, no build step, nothing from outside. */
const ASSETS: ReadonlyMap<string, StaticAsset> = new Map([
  [DASHBOARD_PATH, { contentType: "text/html; charset=utf-8", body: readStatic("index.html") }],
  [`${DASHBOARD_PATH}/`, { contentType: "text/html; charset=utf-8", body: readStatic("index.html") }],
  [`${DASHBOARD_PATH}/app.js`, { contentType: JS, body: readStatic("app.js") }],
  [`${DASHBOARD_PATH}/app.css`, { contentType: "text/css; charset=utf-8", body: readStatic("app.css") }],
  // Hearts list, charts and the signature debugger: ES modules beside app.js.
  [`${DASHBOARD_PATH}/insights.js`, { contentType: JS, body: readStatic("insights.js") }],
  [`${DASHBOARD_PATH}/signature-debugger.js`, { contentType: JS, body: readStatic("signature-debugger.js") }],
  [`${DASHBOARD_PATH}/signature-check.js`, { contentType: JS, body: readStatic("signature-check.js") }],
  [`${DASHBOARD_PATH}/hmac-sha256.js`, { contentType: JS, body: readStatic("hmac-sha256.js") }],
  [`${DASHBOARD_PATH}/claim-setup.js`, { contentType: JS, body: readStatic("claim-setup.js") }],
  [`${DASHBOARD_PATH}/plugin-activity.js`, { contentType: JS, body: readStatic("plugin-activity.js") }],
  [`${DASHBOARD_PATH}/voter-roles.js`, { contentType: JS, body: readStatic("voter-roles.js") }],
  [`${DASHBOARD_PATH}/rewards.js`, { contentType: JS, body: readStatic("rewards.js") }],
  [`${DASHBOARD_PATH}/goals.js`, { contentType: JS, body: readStatic("goals.js") }],
  [`${DASHBOARD_PATH}/plugin-setup.js`, { contentType: JS, body: readStatic("plugin-setup.js") }],
  [`${DASHBOARD_PATH}/signature-rules.json`, { contentType: "application/json", body: Buffer.from(JSON.stringify(SIGNATURE_RULES)) }],
  [`${DASHBOARD_PATH}/vendor/chart.umd.min.js`, { contentType: JS, body: readChartJs() }],
]);

/** Same-origin only: no inline script, nothing from another host, no framing. */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const SECURITY_HEADERS = {
  "content-security-policy": CONTENT_SECURITY_POLICY,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

/**
 * The server owners' dashboard, mounted on the gateway through `extraRoutes`:
 *
 * - `GET /dashboard` (plus its scripts, styles, `signature-rules.json` and the vendored
 *   Chart.js): the single page. Public: they hold no data.
 * - `GET /dashboard/login?token=dl_...`: an owner's one-time login link (minted by the
 *   CreateDashboardLoginLink RPC) -> session cookie (HttpOnly, SameSite=Strict, Secure
 *   with an https public URL, Path=/dashboard) and a redirect to the page.
 * - `/dashboard/api/...`: the JSON API the page calls. Either the operator's
 *   `Authorization: Bearer <DASHBOARD_TOKEN>` (constant-time compare; every server), or
 *   an owner's session cookie (that owner's servers only; state-changing calls also need
 *   `X-CSRF-Token` and a same-origin Origin/Sec-Fetch-Site), else 401.
 *
 * Request and answer bodies, cookies and tokens are never logged (bodies carry secrets
 * on create, rotate and reveal).
 */
export function createDashboardRoutes(deps: DashboardDeps): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  const api: ApiContext = {
    operatorToken: deps.token ?? "",
    operatorClients: createDashboardClients(deps.transport),
    transport: deps.transport,
    access: createAccessClient(deps.transport),
    secureCookies: deps.secureCookies ?? false,
    log: deps.log,
    now: deps.now ?? (() => new Date()),
  };
  return async (req, res) => {
    const url = req.url ?? "/";
    const queryAt = url.indexOf("?");
    const path = queryAt === -1 ? url : url.slice(0, queryAt);
    if (path !== DASHBOARD_PATH && !path.startsWith(`${DASHBOARD_PATH}/`)) return false;
    const query = new URLSearchParams(queryAt === -1 ? "" : url.slice(queryAt + 1));

    if (path === DASHBOARD_LOGIN_PATH) {
      await serveLogin(api, req, res, query);
      return true;
    }
    if (path === DASHBOARD_API_PREFIX || path.startsWith(`${DASHBOARD_API_PREFIX}/`)) {
      await serveApi(api, req, res, path.slice(DASHBOARD_API_PREFIX.length), query);
      return true;
    }
    const asset = ASSETS.get(path);
    if (!asset) {
      sendError(res, errorReply("notFound"));
      return true;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      sendError(res, errorReply("methodNotAllowed", { headers: { allow: "GET, HEAD" } }));
      return true;
    }
    res.writeHead(200, {
      "content-type": asset.contentType,
      "content-length": asset.body.length,
      "cache-control": "no-cache",
      ...SECURITY_HEADERS,
    });
    res.end(req.method === "HEAD" ? undefined : asset.body);
    return true;
  };
}

interface ApiContext {
  operatorToken: string;
  operatorClients: DashboardClients;
  transport: Transport;
  access: Client<typeof AccessService>;
  secureCookies: boolean;
  log: Logger;
  now: () => Date;
}

/** Who is calling, with the clients they may use; or the answer that refuses them. */
type Caller = { kind: "ok"; viewer: Viewer; clients: DashboardClients; sessionToken?: string } | { kind: "refused"; reply: HttpReply };

/**
 * The one authentication step of the API: the operator's bearer token, else the owner's
 * session cookie (checked with the referral service on every request, so a revoked
 * session stops at once) and, for state-changing methods, the CSRF checks.
 */
async function identify(api: ApiContext, req: IncomingMessage, call: CallOptions): Promise<Caller> {
  const authorization = req.headers.authorization;
  if (authorization !== undefined) {
    if (api.operatorToken === "" || !isAuthorized(authorization, api.operatorToken)) {
      return { kind: "refused", reply: errorReply("dashboardTokenInvalid", { headers: { "www-authenticate": 'Bearer realm="dashboard"' } }) };
    }
    return { kind: "ok", viewer: { kind: "operator" }, clients: api.operatorClients };
  }
  const sessionToken = readCookie(req.headers.cookie, SESSION_COOKIE);
  if (sessionToken === undefined || sessionToken === "") {
    return { kind: "refused", reply: errorReply("dashboardTokenInvalid", { headers: { "www-authenticate": 'Bearer realm="dashboard"' } }) };
  }
  let found;
  try {
    found = await api.access.getDashboardSession({ sessionToken }, call);
  } catch (error) {
    // Failure policy: an unknown, expired or revoked session is 401 with the cookie cleared; other failures go to the error table.
    if (error instanceof ConnectError && error.code === Code.NotFound) {
      return { kind: "refused", reply: errorReply("sessionExpired", error.rawMessage, { headers: { "set-cookie": clearedSessionCookie(api.secureCookies) } }) };
    }
    throw error;
  }
  const csrfToken = csrfTokenFor(sessionToken);
  if (req.method !== "GET" && req.method !== "HEAD") {
    const problem = checkCsrf(req.headers, csrfToken);
    if (problem !== undefined) return { kind: "refused", reply: errorReply("forbidden", problem) };
  }
  const viewer: Viewer = {
    kind: "owner",
    ownerId: found.owner?.id ?? "",
    displayName: found.owner?.displayName ?? "",
    csrfToken,
    expiresAt: found.session?.expiresAt ? timestampDate(found.session.expiresAt) : api.now(),
  };
  return { kind: "ok", viewer, clients: createSessionClients(api.transport, sessionToken), sessionToken };
}

/** `GET /dashboard/login?token=...`: redeems a one-time login link, sets the session cookie, redirects to the page. */
async function serveLogin(api: ApiContext, req: IncomingMessage, res: ServerResponse, query: URLSearchParams): Promise<void> {
  if (req.method !== "GET") {
    // Only GET redeems: a HEAD from a link checker must not use up the link.
    sendError(res, errorReply("methodNotAllowed", { headers: { allow: "GET" } }));
    return;
  }
  const loginToken = query.get("token") ?? "";
  if (loginToken === "") {
    sendLoginPage(res, 400, "This login link is incomplete: it carries no token.");
    return;
  }
  const requestId = String(res.getHeader(REQUEST_ID_HEADER) ?? "");
  try {
    const redeemed = await api.access.redeemDashboardLoginLink(
      { loginToken },
      { timeoutMs: DASHBOARD_RPC_TIMEOUT_MS, headers: requestId === "" ? undefined : { [REQUEST_ID_HEADER]: requestId } },
    );
    const expiresAt = redeemed.session?.expiresAt ? timestampDate(redeemed.session.expiresAt).getTime() : api.now().getTime();
    const maxAgeSeconds = Math.max(0, Math.floor((expiresAt - api.now().getTime()) / 1000));
    res.writeHead(303, {
      location: DASHBOARD_PATH,
      "set-cookie": sessionCookie(redeemed.sessionToken, maxAgeSeconds, api.secureCookies),
      "cache-control": "no-store",
      ...SECURITY_HEADERS,
    });
    res.end();
  } catch (error) {
    // Failure policy: a used, expired or unknown link gets the service's message; other causes are logged, never shown.
    if (error instanceof ConnectError && error.code === Code.NotFound) {
      sendLoginPage(res, 404, error.rawMessage);
      return;
    }
    const mapped = toApiError(error);
    if (mapped.log) api.log.error({ requestId, route: DASHBOARD_LOGIN_PATH, err: error }, "dashboard login failed");
    sendLoginPage(res, mapped.reply.status, mapped.message);
  }
}

async function serveApi(api: ApiContext, req: IncomingMessage, res: ServerResponse, apiPath: string, query: URLSearchParams): Promise<void> {
  const requestId = String(res.getHeader(REQUEST_ID_HEADER) ?? "");
  const headers = requestId === "" ? undefined : { [REQUEST_ID_HEADER]: requestId };
  const call: CallOptions = { timeoutMs: DASHBOARD_RPC_TIMEOUT_MS, headers };
  let caller: Caller;
  try {
    caller = await identify(api, req, call);
  } catch (error) {
    // Failure policy: the session could not be checked (service down, ...): answer the mapped status, never let the call through.
    const mapped = toApiError(error);
    if (mapped.log) api.log.error({ requestId, route: `${DASHBOARD_API_PREFIX}${apiPath}`, err: error }, "dashboard session check failed");
    sendError(res, mapped.reply);
    return;
  }
  if (caller.kind === "refused") {
    sendError(res, caller.reply);
    return;
  }
  if (apiPath === LOGOUT_API_PATH && caller.sessionToken !== undefined) {
    if (req.method !== "POST") {
      sendError(res, errorReply("methodNotAllowed", { headers: { allow: "POST" } }));
      return;
    }
    await api.access.endDashboardSession({ sessionToken: caller.sessionToken }, call);
    sendJson(res, 200, { ok: true }, { "set-cookie": clearedSessionCookie(api.secureCookies) });
    return;
  }
  const match = matchApiRoute(req.method ?? "GET", apiPath === "" ? "/" : apiPath);
  if (match.kind === "not_found") {
    sendError(res, errorReply("notFound"));
    return;
  }
  if (match.kind === "method_not_allowed") {
    sendError(res, errorReply("methodNotAllowed", { headers: { allow: match.allow } }));
    return;
  }
  const body = await readJsonBody(req);
  if (body.kind !== "ok") {
    if (body.kind === "aborted") {
      // Failure policy: the client is gone before its body arrived; nothing was done, so nothing to answer.
      res.destroy();
      return;
    }
    sendError(res, body.reply);
    return;
  }
  const request: ApiRequest = {
    viewer: caller.viewer,
    params: match.params,
    query,
    body: body.value,
    call,
    slowCall: { timeoutMs: TEST_SEND_RPC_TIMEOUT_MS, headers },
  };
  try {
    // The access rule (see ROUTES in api.ts): an owner's path parameters are checked before any handler runs.
    if (caller.viewer.kind === "owner") await checkOwnerParams(match.route, caller.clients, match.params, call);
    const reply = await match.route.handle({ clients: caller.clients, now: api.now }, request);
    if (reply.file) sendFile(res, reply.file);
    else sendJson(res, reply.status ?? 200, reply.body);
  } catch (error) {
    // Failure policy: answer the mapped status with a message safe to show; unexpected causes are logged, never sent.
    const mapped = toApiError(error);
    if (mapped.log) api.log.error({ requestId, route: `${DASHBOARD_API_PREFIX}${apiPath}`, err: error }, "dashboard API call failed");
    sendError(res, mapped.reply);
  }
}

/** A minimal page for the login link's failures (the owner opened it in a browser). */
function sendLoginPage(res: ServerResponse, status: number, message: string): void {
  const escaped = message.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Dashboard login</title></head><body><h1>Dashboard login</h1><p id="login-link-error">${escaped}</p></body></html>`;
  res.writeHead(status, {
    "content-type": "text/html; charset=utf-8",
    "content-length": Buffer.byteLength(html),
    "cache-control": "no-store",
    ...SECURITY_HEADERS,
  });
  res.end(html);
}

type JsonBody = { kind: "ok"; value: Record<string, unknown> } | { kind: "invalid"; reply: HttpReply } | { kind: "aborted" };

/** Reads the JSON object body of a POST/PUT (`{}` for none); GET bodies are ignored. */
async function readJsonBody(req: IncomingMessage): Promise<JsonBody> {
  if (req.method === "GET" || req.method === "HEAD") return { kind: "ok", value: {} };
  if (declaresTooLarge(req.headers, MAX_DASHBOARD_BODY_BYTES)) {
    req.pause();
    return { kind: "invalid", reply: bodyTooLarge() };
  }
  const raw = await readRawBody(req, MAX_DASHBOARD_BODY_BYTES);
  if (raw.kind === "too_large") return { kind: "invalid", reply: bodyTooLarge() };
  if (raw.kind === "aborted") return { kind: "aborted" };
  const text = raw.bytes.toString("utf8").trim();
  if (text === "") return { kind: "ok", value: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Failure policy: a body that is not JSON is the caller's mistake: 400, nothing called.
    return { kind: "invalid", reply: errorReply("invalidJson") };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return { kind: "invalid", reply: errorReply("bodyNotObject") };
  return { kind: "ok", value: parsed as Record<string, unknown> };
}

/** 413: the connection is closed (the rest of the body is not read). */
function bodyTooLarge(): HttpReply {
  return errorReply("bodyTooLarge", { headers: { connection: "close" } });
}

/** A download (an export): never cached, as an attachment, with the dashboard's security headers. */
function sendFile(res: ServerResponse, file: { contentType: string; filename: string; content: string; truncated: boolean }): void {
  res.writeHead(200, {
    ...(file.truncated ? { "x-export-truncated": "true" } : {}),
    "content-type": file.contentType,
    "content-length": Buffer.byteLength(file.content),
    "content-disposition": `attachment; filename="${file.filename.replace(/[^A-Za-z0-9._-]/g, "_")}"`,
    "cache-control": "no-store",
    ...SECURITY_HEADERS,
  });
  res.end(file.content);
}

/** Sends an error reply built by errorReply (gateway/http-errors.ts). */
function sendError(res: ServerResponse, reply: HttpReply): void {
  sendJson(res, reply.status, reply.body, reply.headers);
}
/** A dashboard JSON reply: never cached, with the dashboard's security headers. */
function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  writeJson(res, status, body, { "cache-control": "no-store", ...SECURITY_HEADERS, ...headers });
}
