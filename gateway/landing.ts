import { readFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { DASHBOARD_PATH } from "./dashboard/routes.js";
import { OPENAPI_PATH } from "./openapi.js";
import { escapeHtml, htmlPage, PAGE_HEADERS, renderMarkdown } from "./markdown.js";
import type { RawReply } from "./http-errors.js";

/** The gateway's front page: where a newcomer's browser or `curl` lands. */
export const LANDING_PATH = "/";
/** Prefix of the project's documents served by the gateway. */
export const DOCS_PREFIX = "/docs/";

/** The documents served at /docs/<file>, with their titles; read once, from the docs folder beside the code (dist/docs in a build). */
export const PUBLIC_DOCS: ReadonlyArray<{ file: string; title: string }> = [
  { file: "contract.md", title: "The contract: ingest endpoint, reward callback, statuses and error texts" },
  { file: "integration-guide.md", title: "Integration guide for game-server backends (signing, snippets, test vectors)" },
  { file: "callbacks.md", title: "Reward callbacks for server owners (verification, retries, Standard Webhooks)" },
  { file: "dashboard.md", title: "The owner dashboard" },
  { file: "votifier-and-pull.md", title: "Votifier v2 transport and the signed pull API (server owners)" },
];

const DOCS = new Map(PUBLIC_DOCS.map(({ file }) => [file, readFileSync(new URL(`../docs/${file}`, import.meta.url))]));
/** Each document rendered to one HTML page, once (the files do not change while the process runs). */
const DOC_PAGES = new Map(
  PUBLIC_DOCS.map(({ file, title }) => {
    const markdown = DOCS.get(file)?.toString("utf8") ?? "";
    const nav = `<nav><a href="${LANDING_PATH}">All documents</a> · <a href="${DOCS_PREFIX}${file}?format=md">Markdown source</a></nav>`;
    return [file, htmlPage(title, `${nav}\n${renderMarkdown(markdown)}`)];
  }),
);

/** True when the client asks for an HTML page (a browser): `Accept` names text/html. */
function wantsHtml(req: Pick<IncomingMessage, "headers">): boolean {
  return /\btext\/html\b/.test(req.headers.accept ?? "");
}

/** The links of the front page, relative to the gateway. */
export function landingLinks(opts: { dashboard: boolean }) {
  return {
    ...(opts.dashboard ? { dashboard: DASHBOARD_PATH } : {}),
    openapi: OPENAPI_PATH,
    docs: Object.fromEntries(PUBLIC_DOCS.map(({ file }) => [file.replace(/\.md$/, ""), `${DOCS_PREFIX}${file}`])),
    ingest: "POST /api/referral/events",
    health: "/healthz",
    readiness: "/readyz",
  };
}

/**
 * GET / : links to the dashboard, the docs and the OpenAPI document. HTML for a browser
 * (`Accept: text/html`), JSON otherwise.
 */
export function landingReply(req: IncomingMessage, opts: { dashboard: boolean }): RawReply {
  const links = landingLinks(opts);
  if (!wantsHtml(req)) {
    return { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify({ service: "referral and reward-callback service", links }) };
  }
  const item = (href: string, text: string) => `<li><a href="${escapeHtml(href)}">${escapeHtml(text)}</a></li>`;
  const body = [
    "<h1>Referral and reward-callback service</h1>",
    "<ul>",
    opts.dashboard ? item(DASHBOARD_PATH, "Owner dashboard") : "<li>Owner dashboard: not enabled (set DASHBOARD_TOKEN)</li>",
    item(OPENAPI_PATH, "OpenAPI 3.1 document"),
    ...PUBLIC_DOCS.map(({ file, title }) => item(`${DOCS_PREFIX}${file}`, title)),
    "</ul>",
    '<p>Ingest endpoint: <code>POST /api/referral/events</code>. Health: <a href="/healthz">/healthz</a>, <a href="/readyz">/readyz</a>.</p>',
  ].join("\n");
  return { status: 200, headers: { ...PAGE_HEADERS }, body: htmlPage("Referral and reward-callback service", body) };
}

/**
 * GET /docs/<file>: one of PUBLIC_DOCS, rendered as an HTML page for a browser (`Accept: text/html`,
 * strict CSP), as its Markdown text otherwise or with `?format=md`; undefined for any other path.
 */
export function docReply(path: string, req?: Pick<IncomingMessage, "headers">, query?: URLSearchParams): RawReply | undefined {
  const file = path.slice(DOCS_PREFIX.length);
  const body = DOCS.get(file);
  if (body === undefined) return undefined;
  const cache = { "cache-control": "public, max-age=300", vary: "accept" };
  const page = DOC_PAGES.get(file);
  if (req !== undefined && wantsHtml(req) && query?.get("format") !== "md" && page !== undefined) {
    return { status: 200, headers: { ...PAGE_HEADERS, ...cache }, body: page };
  }
  return { status: 200, headers: { "content-type": "text/markdown; charset=utf-8", ...cache }, body };
}
