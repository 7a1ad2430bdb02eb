/**
 * The gateway's Markdown renderer (gateway/markdown.ts) for /docs/<file>: the blocks the docs use,
 * and safety: every character of the source is escaped, no raw HTML passes, unsafe link targets are dropped.
 */
import test from "ava";
import { readFileSync } from "node:fs";
import { escapeHtml, htmlPage, PAGE_CSP, renderInline, renderMarkdown } from "../../gateway/markdown.js";
import { PUBLIC_DOCS } from "../../gateway/landing.js";

test("headings with ids, paragraphs, emphasis, inline code", (t) => {
  t.is(
    renderMarkdown("# The contract: ingest\n\nSome **bold**, *em* and `a < b` text.\nSecond line."),
    [
      '<h1 id="the-contract-ingest">The contract: ingest</h1>',
      "<p>Some <strong>bold</strong>, <em>em</em> and <code>a &lt; b</code> text.\nSecond line.</p>",
    ].join("\n"),
  );
  t.is(renderInline("snake_case_name and server_event_id stay"), "snake_case_name and server_event_id stay");
});

test("lists (bullets, numbers, nested, continued lines)", (t) => {
  t.is(
    renderMarkdown("- one\n  continued\n- two\n  - nested\n\n1. first\n2. second"),
    "<ul>\n<li>one continued</li>\n<li>two<ul>\n<li>nested</li>\n</ul></li>\n</ul>\n<ol>\n<li>first</li>\n<li>second</li>\n</ol>",
  );
});

test("fenced code blocks keep their text, escaped, with the language as a class", (t) => {
  t.is(
    renderMarkdown("```sh\ncurl -H 'a: <b>' x && echo *not em*\n```"),
    '<pre><code class="language-sh">curl -H &#39;a: &lt;b&gt;&#39; x &amp;&amp; echo *not em*</code></pre>',
  );
});

test("pipe tables, with an escaped pipe inside a cell", (t) => {
  t.is(
    renderMarkdown("| Status | Text |\n|---|---|\n| 400 | `registered\\|qualified` |"),
    '<div class="table"><table>\n<thead><tr><th>Status</th><th>Text</th></tr></thead>\n<tbody>\n<tr><td>400</td><td><code>registered|qualified</code></td></tr>\n</tbody>\n</table></div>',
  );
});

test("links: relative, in-page and http(s) kept; javascript: and data: dropped to their text", (t) => {
  t.is(
    renderInline("[guide](integration-guide.md) [x](#errors) [site](https://example.com/a?b=1&c=2)"),
    '<a href="integration-guide.md">guide</a> <a href="#errors">x</a> <a href="https://example.com/a?b=1&amp;c=2">site</a>',
  );
  t.is(renderInline("[click](javascript:alert(1))"), "click)");
  t.is(renderInline("[img](data:text/html;base64,AAAA)"), "img");
});

test("escapes everything: raw HTML, attributes and entities never pass", (t) => {
  const hostile = '<script>alert(1)</script>\n\n<img src=x onerror="alert(1)">\n\n| <b>h</b> |\n|---|\n| "q" & \'a\' |\n\n- <iframe>\n\n> <style>x</style>';
  const html = renderMarkdown(hostile);
  t.false(/<(script|img|iframe|style|b)\b/i.test(html), html);
  t.true(html.includes("&lt;script&gt;alert(1)&lt;/script&gt;"));
  t.true(html.includes("&quot;q&quot; &amp; &#39;a&#39;"));
  t.is(escapeHtml(`<&>"'`), "&lt;&amp;&gt;&quot;&#39;");
});

test("every served document renders: a heading, no Markdown table or fence left raw", (t) => {
  for (const { file } of PUBLIC_DOCS) {
    const html = renderMarkdown(readFileSync(new URL(`../../docs/${file}`, import.meta.url), "utf8"));
    t.regex(html, /^<h1 id="/, file);
    t.false(/^\|.*\|$/m.test(html), `${file}: a table row left as text`);
    t.false(/^```/m.test(html), `${file}: a fence left as text`);
  }
});

test("the page: a strict CSP (no script, only the page's own stylesheet by hash), title escaped", (t) => {
  t.regex(PAGE_CSP, /^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'$/);
  t.false(PAGE_CSP.includes("script-src"));
  const page = htmlPage("a <b> title", "<p>x</p>");
  t.true(page.includes("<title>a &lt;b&gt; title</title>"));
});
