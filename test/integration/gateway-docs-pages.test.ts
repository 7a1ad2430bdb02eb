/**
 * A newcomer's first contact with the gateway in a browser: `GET /` is a page of links and
 * `/docs/<file>` is each document rendered as HTML (gateway/markdown.ts), under a strict CSP; tools
 * (`Accept: application/json`, curl's `*\/*`) keep the JSON links and the raw Markdown.
 */
import anyTest, { type TestFn } from "ava";
import type { AddressInfo } from "node:net";
import { createReferralServiceClients } from "../../gateway/clients.js";
import { PUBLIC_DOCS } from "../../gateway/landing.js";
import { createGatewayServer } from "../../gateway/server.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createMetrics } from "../../services/shared/runtime/metrics.js";

const test = anyTest as TestFn<{ url: string; close: () => Promise<void> }>;
const BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

test.before(async (t) => {
  // The pages need no referral service: the clients point at a closed port.
  const server = createGatewayServer({
    ...createReferralServiceClients("http://127.0.0.1:9", "rst_unused-by-these-pages-0123456789-0123456789"),
    log: createLogger("docs-pages", "silent"),
    metrics: createMetrics("docs-pages"),
    now: () => new Date(),
    dashboard: true,
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.context = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
});
test.after.always(async (t) => {
  await t.context.close?.();
});

test("a browser opening a document gets it rendered as HTML (headings, tables, code) under a strict CSP", async (t) => {
  for (const { file, title } of PUBLIC_DOCS) {
    const res = await fetch(`${t.context.url}/docs/${file}`, { headers: { accept: BROWSER_ACCEPT } });
    t.is(res.status, 200, file);
    t.regex(res.headers.get("content-type") ?? "", /^text\/html; charset=utf-8$/, file);
    const csp = res.headers.get("content-security-policy") ?? "";
    t.regex(csp, /default-src 'none'/, file);
    t.false(csp.includes("script-src"), `${file}: no script allowed`);
    t.is(res.headers.get("x-content-type-options"), "nosniff");
    const html = await res.text();
    t.true(html.startsWith("<!doctype html>"), file);
    t.true(html.includes(`<title>${title.replace(/&/g, "&amp;").replace(/'/g, "&#39;")}</title>`), file);
    t.regex(html, /<h1 id="[^"]+">/, file);
    t.false(/^#{1,6} /m.test(html.replace(/<pre>[\s\S]*?<\/pre>/g, "")), `${file}: no raw Markdown heading outside code blocks`);
    t.false(/<script\b/i.test(html), file);
  }
  const contract = await (await fetch(`${t.context.url}/docs/contract.md`, { headers: { accept: BROWSER_ACCEPT } })).text();
  t.true(contract.includes("<table>") && contract.includes("<code>"), "tables and code are rendered");
  t.true(contract.includes('<a href="integration-guide.md">'), "relative links stay relative, so they open the rendered sibling");
});

test("tools keep the Markdown: curl's */*, or ?format=md from a browser", async (t) => {
  const raw = await fetch(`${t.context.url}/docs/contract.md`);
  t.regex(raw.headers.get("content-type") ?? "", /^text\/markdown/);
  t.true((await raw.text()).startsWith("# The contract"));
  const source = await fetch(`${t.context.url}/docs/contract.md?format=md`, { headers: { accept: BROWSER_ACCEPT } });
  t.regex(source.headers.get("content-type") ?? "", /^text\/markdown/);
});

test("GET / in a browser: a page of links to the dashboard, the OpenAPI document and every rendered document, under the same CSP", async (t) => {
  const res = await fetch(`${t.context.url}/`, { headers: { accept: BROWSER_ACCEPT } });
  t.regex(res.headers.get("content-type") ?? "", /^text\/html/);
  t.regex(res.headers.get("content-security-policy") ?? "", /default-src 'none'/);
  const html = await res.text();
  for (const href of ["/dashboard", "/openapi/referral.json", ...PUBLIC_DOCS.map(({ file }) => `/docs/${file}`)]) t.true(html.includes(`href="${href}"`), href);
  const json = await fetch(`${t.context.url}/`, { headers: { accept: "application/json" } });
  t.regex(json.headers.get("content-type") ?? "", /^application\/json/);
});
