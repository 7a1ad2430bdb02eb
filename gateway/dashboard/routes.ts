import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "../../services/shared/log.js";
import { declaresTooLarge, readRawBody } from "../raw-body.js";
import { REQUEST_ID_HEADER } from "../request-id.js";
import { DASHBOARD_RPC_TIMEOUT_MS, TEST_SEND_RPC_TIMEOUT_MS, matchApiRoute, toApiError, type ApiRequest } from "./api.js";
import { isAuthorized } from "./auth.js";
import type { DashboardClients } from "./clients.js";
import { SIGNATURE_RULES } from "./signature-rules.js";

/** Where the page lives. */
export const DASHBOARD_PATH = "/dashboard";
/** Prefix of the JSON API the page calls. */
export const DASHBOARD_API_PREFIX = "/dashboard/api";
/** Largest JSON body the dashboard API reads. */
export const MAX_DASHBOARD_BODY_BYTES = 16_384;

/** What the dashboard needs; built in gateway/main.ts, scripts/start.ts or a test. */
export interface DashboardDeps {
  /** Clients of the internal services (structurally the same as the test stack's ServiceClients). */
  clients: DashboardClients;
  /** DASHBOARD_TOKEN; empty or undefined disables the dashboard (its paths answer 404). */
  token: string | undefined;
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
 * - `/dashboard/api/...`: the JSON API the page calls; each call needs
 *   `Authorization: Bearer <DASHBOARD_TOKEN>` (constant-time compare), else 401.
 *
 * Without a token every dashboard path is left to the gateway's 404. Request and
 * answer bodies are never logged (they carry secrets on create, rotate and reveal).
 */
export function createDashboardRoutes(deps: DashboardDeps): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  const token = deps.token ?? "";
  const now = deps.now ?? (() => new Date());
  return async (req, res) => {
    if (token === "") return false;
    const url = req.url ?? "/";
    const queryAt = url.indexOf("?");
    const path = queryAt === -1 ? url : url.slice(0, queryAt);
    if (path !== DASHBOARD_PATH && !path.startsWith(`${DASHBOARD_PATH}/`)) return false;

    if (path === DASHBOARD_API_PREFIX || path.startsWith(`${DASHBOARD_API_PREFIX}/`)) {
      const query = new URLSearchParams(queryAt === -1 ? "" : url.slice(queryAt + 1));
      await serveApi({ clients: deps.clients, log: deps.log, now, token }, req, res, path.slice(DASHBOARD_API_PREFIX.length), query);
      return true;
    }
    const asset = ASSETS.get(path);
    if (!asset) {
      sendJson(res, 404, { error: "not found" });
      return true;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      sendJson(res, 405, { error: "method not allowed" }, { allow: "GET, HEAD" });
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

async function serveApi(
  deps: { clients: DashboardClients; log: Logger; now: () => Date; token: string },
  req: IncomingMessage,
  res: ServerResponse,
  apiPath: string,
  query: URLSearchParams,
): Promise<void> {
  if (!isAuthorized(req.headers.authorization, deps.token)) {
    sendJson(res, 401, { error: "missing or invalid dashboard token" }, { "www-authenticate": 'Bearer realm="dashboard"' });
    return;
  }
  const match = matchApiRoute(req.method ?? "GET", apiPath === "" ? "/" : apiPath);
  if (match.kind === "not_found") {
    sendJson(res, 404, { error: "not found" });
    return;
  }
  if (match.kind === "method_not_allowed") {
    sendJson(res, 405, { error: "method not allowed" }, { allow: match.allow });
    return;
  }
  const body = await readJsonBody(req);
  if (body.kind !== "ok") {
    if (body.kind === "aborted") {
      // Failure policy: the client is gone before its body arrived; nothing was done, so nothing to answer.
      res.destroy();
      return;
    }
    sendJson(res, body.status, { error: body.error }, body.status === 413 ? { connection: "close" } : undefined);
    return;
  }
  const requestId = String(res.getHeader(REQUEST_ID_HEADER) ?? "");
  const headers = requestId === "" ? undefined : { [REQUEST_ID_HEADER]: requestId };
  const request: ApiRequest = {
    params: match.params,
    query,
    body: body.value,
    call: { timeoutMs: DASHBOARD_RPC_TIMEOUT_MS, headers },
    slowCall: { timeoutMs: TEST_SEND_RPC_TIMEOUT_MS, headers },
  };
  try {
    const reply = await match.handle({ clients: deps.clients, now: deps.now }, request);
    sendJson(res, reply.status ?? 200, reply.body);
  } catch (error) {
    // Failure policy: answer the mapped status with a message safe to show; unexpected causes are logged, never sent.
    const mapped = toApiError(error);
    if (mapped.log) deps.log.error({ requestId, route: `${DASHBOARD_API_PREFIX}${apiPath}`, err: error }, "dashboard API call failed");
    sendJson(res, mapped.status, { error: mapped.message });
  }
}

type JsonBody = { kind: "ok"; value: Record<string, unknown> } | { kind: "invalid"; status: number; error: string } | { kind: "aborted" };

/** Reads the JSON object body of a POST/PUT (`{}` for none); GET bodies are ignored. */
async function readJsonBody(req: IncomingMessage): Promise<JsonBody> {
  if (req.method === "GET" || req.method === "HEAD") return { kind: "ok", value: {} };
  if (declaresTooLarge(req.headers, MAX_DASHBOARD_BODY_BYTES)) {
    req.pause();
    return { kind: "invalid", status: 413, error: "body too large" };
  }
  const raw = await readRawBody(req, MAX_DASHBOARD_BODY_BYTES);
  if (raw.kind === "too_large") return { kind: "invalid", status: 413, error: "body too large" };
  if (raw.kind === "aborted") return { kind: "aborted" };
  const text = raw.bytes.toString("utf8").trim();
  if (text === "") return { kind: "ok", value: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Failure policy: a body that is not JSON is the caller's mistake: 400, nothing called.
    return { kind: "invalid", status: 400, error: "body is not valid JSON" };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return { kind: "invalid", status: 400, error: "body must be a JSON object" };
  return { kind: "ok", value: parsed as Record<string, unknown> };
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(payload),
    "cache-control": "no-store",
    ...SECURITY_HEADERS,
    ...headers,
  });
  res.end(payload);
}
