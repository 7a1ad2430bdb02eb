import { createHash } from "node:crypto";

/**
 * A small, dependency-free Markdown renderer for the project's own documents (docs/*.md served at
 * /docs/<file>): ATX headings (with ids), paragraphs, bullet and numbered lists (nested by indent),
 * fenced code blocks, pipe tables, block quotes, rules, and inline code, bold, emphasis and links.
 * Everything is escaped: no raw HTML passes through, and a link keeps only http(s), mailto, relative
 * and in-page targets. It covers what the docs use, not all of CommonMark. Pure: no I/O.
 */

/** Escapes text for HTML content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);
}

/** A heading's id: lower case, letters, digits and dashes (GitHub's style, near enough for in-page links). */
export function slugOf(text: string): string {
  return text
    .toLowerCase()
    .replace(/<[^>]*>/g, "")
    .replace(/[`*_[\]()]/g, "")
    .replace(/[^\p{L}\p{N}\s-]/gu, "")
    .trim()
    .replace(/\s/g, "-");
}

/** A link target kept as is: http(s), mailto, a path, or an in-page anchor; anything else (javascript:, data:) is dropped. */
function safeHref(raw: string): string | undefined {
  const href = raw.trim();
  if (/^(https?:\/\/|mailto:)/i.test(href)) return href;
  if (/^[a-z][a-z0-9+.-]*:/i.test(href)) return undefined;
  return href;
}

/** Placeholders for inline code while the rest of a line is formatted (the private-use character never occurs in the docs). */
const CODE_MARK = "\uE000";

/** Inline formatting of one run of text: code spans, backslash escapes, links, bold, emphasis; everything escaped. */
export function renderInline(text: string): string {
  const codes: string[] = [];
  // Code spans first: their content is literal.
  let rest = text.replace(/(`+)([\s\S]*?[^`])\1(?!`)/g, (_m, _ticks: string, code: string) => {
    codes.push(`<code>${escapeHtml(code.trim() === "" ? code : code.replace(/^ (.*) $/, "$1"))}</code>`);
    return `${CODE_MARK}${codes.length - 1}${CODE_MARK}`;
  });
  // Backslash escapes of punctuation become the character itself (held aside like code, so it stays literal).
  rest = rest.replace(/\\([!-/:-@[-`{-~])/g, (_m, c: string) => {
    codes.push(escapeHtml(c));
    return `${CODE_MARK}${codes.length - 1}${CODE_MARK}`;
  });
  let html = escapeHtml(rest);
  html = html.replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (_match, label: string, target: string) => {
    const href = safeHref(target.replace(/&amp;/g, "&"));
    return href === undefined ? label : `<a href="${escapeHtml(href)}">${label}</a>`;
  });
  html = html.replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>");
  html = html.replace(/(^|[^\w*])\*([^*\s][^*]*?)\*(?![\w*])/g, "$1<em>$2</em>");
  html = html.replace(/(^|[^\w])_([^_\s][^_]*?)_(?![\w])/g, "$1<em>$2</em>");
  return html.replace(new RegExp(`${CODE_MARK}(\\d+)${CODE_MARK}`, "g"), (_m, i: string) => codes[Number(i)] ?? "");
}

/** Splits a table row on unescaped pipes (a `\|` stays in its cell as a literal pipe, also inside code, as in GitHub's tables). */
function tableCells(line: string): string[] {
  const trimmed = line
    .trim()
    .replace(/^\|/, "")
    .replace(/(?<!\\)\|$/, "");
  const cells: string[] = [];
  let cell = "";
  for (let i = 0; i < trimmed.length; i++) {
    const c = trimmed[i]!;
    if (c === "\\" && trimmed[i + 1] === "|") {
      cell += "|";
      i++;
    } else if (c === "|") {
      cells.push(cell.trim());
      cell = "";
    } else cell += c;
  }
  cells.push(cell.trim());
  return cells;
}

const TABLE_DELIMITER = /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;
const LIST_ITEM = /^(\s*)([-*+]|\d+[.)])\s+(.*)$/;
const FENCE = /^\s*(```+|~~~+)\s*([\w-]*)\s*$/;

/** Renders a list starting at `start` (items at `indent`); returns the HTML and the next line. */
function renderList(lines: string[], start: number, indent: number): { html: string; next: number } {
  const first = LIST_ITEM.exec(lines[start]!)!;
  const ordered = /\d/.test(first[2]!);
  const items: string[] = [];
  let i = start;
  while (i < lines.length) {
    const m = LIST_ITEM.exec(lines[i]!);
    if (!m || m[1]!.length !== indent || /\d/.test(m[2]!) !== ordered) break;
    let text = m[3]!;
    const children: string[] = [];
    i++;
    while (i < lines.length) {
      const line = lines[i]!;
      if (line.trim() === "") {
        // A blank line ends the list unless the next line continues it (indented, or another item).
        const after = lines[i + 1];
        const sibling = after === undefined ? null : LIST_ITEM.exec(after);
        if (
          after !== undefined &&
          ((sibling && sibling[1]!.length === indent && /\d/.test(sibling[2]!) === ordered) ||
            (sibling && sibling[1]!.length > indent) ||
            (!sibling && /^\s+\S/.test(after)))
        ) {
          i++;
          continue;
        }
        break;
      }
      const child = LIST_ITEM.exec(line);
      if (child && child[1]!.length > indent) {
        const nested = renderList(lines, i, child[1]!.length);
        children.push(nested.html);
        i = nested.next;
        continue;
      }
      if (child) break;
      if (!/^\s/.test(line)) break;
      text += ` ${line.trim()}`;
      i++;
    }
    items.push(`<li>${renderInline(text)}${children.join("")}</li>`);
  }
  const tag = ordered ? "ol" : "ul";
  return { html: `<${tag}>\n${items.join("\n")}\n</${tag}>`, next: i };
}

/** Renders Markdown to an HTML fragment (no document wrapper). */
export function renderMarkdown(markdown: string): string {
  const lines = markdown.replace(/\r\n?/g, "\n").split("\n");
  const out: string[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.trim() === "") {
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const code: string[] = [];
      i++;
      while (i < lines.length && !lines[i]!.trim().startsWith(fence[1]!)) code.push(lines[i++]!);
      i++;
      const lang = fence[2] ? ` class="language-${escapeHtml(fence[2])}"` : "";
      out.push(`<pre><code${lang}>${escapeHtml(code.join("\n"))}</code></pre>`);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const level = heading[1]!.length;
      const inner = renderInline(heading[2]!);
      out.push(`<h${level} id="${escapeHtml(slugOf(heading[2]!))}">${inner}</h${level}>`);
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      out.push("<hr>");
      i++;
      continue;
    }
    if (line.includes("|") && lines[i + 1] !== undefined && TABLE_DELIMITER.test(lines[i + 1]!)) {
      const head = tableCells(line);
      const rows: string[][] = [];
      i += 2;
      while (i < lines.length && lines[i]!.includes("|") && lines[i]!.trim() !== "") rows.push(tableCells(lines[i++]!));
      const th = head.map((c) => `<th>${renderInline(c)}</th>`).join("");
      const body = rows.map((r) => `<tr>${r.map((c) => `<td>${renderInline(c)}</td>`).join("")}</tr>`).join("\n");
      out.push(`<div class="table"><table>\n<thead><tr>${th}</tr></thead>\n<tbody>\n${body}\n</tbody>\n</table></div>`);
      continue;
    }
    if (LIST_ITEM.test(line)) {
      const list = renderList(lines, i, LIST_ITEM.exec(line)![1]!.length);
      out.push(list.html);
      i = list.next;
      continue;
    }
    if (/^\s*>/.test(line)) {
      const quoted: string[] = [];
      while (i < lines.length && /^\s*>/.test(lines[i]!)) quoted.push(lines[i++]!.replace(/^\s*>\s?/, ""));
      out.push(`<blockquote>\n${renderMarkdown(quoted.join("\n"))}\n</blockquote>`);
      continue;
    }
    // A paragraph: every following line up to a blank line or the start of another block.
    const para: string[] = [line.trim()];
    i++;
    while (i < lines.length) {
      const next = lines[i]!;
      if (next.trim() === "" || FENCE.test(next) || /^#{1,6}\s/.test(next) || LIST_ITEM.test(next) || /^\s*>/.test(next)) break;
      if (next.includes("|") && lines[i + 1] !== undefined && TABLE_DELIMITER.test(lines[i + 1]!)) break;
      para.push(next.trim());
      i++;
    }
    out.push(`<p>${renderInline(para.join("\n"))}</p>`);
  }
  return out.join("\n");
}

/** The pages' one stylesheet, inline and allowed by its hash in the CSP (no other style or script runs). */
const PAGE_STYLE = [
  "body{font:16px/1.55 system-ui,-apple-system,'Segoe UI',sans-serif;max-width:60rem;margin:0 auto;padding:1rem 1.25rem 4rem;color:#1b1f24;background:#fff}",
  "a{color:#0b57d0}h1,h2,h3{line-height:1.25}h2{margin-top:2.2rem;border-bottom:1px solid #d8dee4;padding-bottom:.3rem}",
  "code{font:0.9em ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f2f4f7;padding:.1em .3em;border-radius:4px}",
  "pre{background:#1f2430;color:#e6e9ef;padding:.9rem 1rem;border-radius:6px;overflow-x:auto}pre code{background:none;padding:0;color:inherit}",
  ".table{overflow-x:auto}table{border-collapse:collapse;margin:1rem 0}th,td{border:1px solid #d8dee4;padding:.35rem .6rem;text-align:left;vertical-align:top}th{background:#f6f8fa}",
  "blockquote{margin:1rem 0;padding:.2rem 1rem;border-left:4px solid #d8dee4;color:#57606a}nav{margin-bottom:1rem;font-size:.95em}",
].join("\n");

/**
 * THE strict policy of the pages the gateway renders: nothing but the page's one inline stylesheet (allowed by its
 * hash); no script, frame, form or base. Pages with a stylesheet of their own (the receipt) pass it.
 */
export function pageCspFor(style: string): string {
  return [
    "default-src 'none'",
    `style-src 'sha256-${createHash("sha256").update(style).digest("base64")}'`,
    "img-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
}

/** The policy of the pages styled with the shared stylesheet (front page, docs). */
export const PAGE_CSP = pageCspFor(PAGE_STYLE);

/** Headers of a rendered page whose one stylesheet is `style`. */
export function pageHeadersFor(style: string): Readonly<Record<string, string>> {
  return {
    "content-type": "text/html; charset=utf-8",
    "content-security-policy": pageCspFor(style),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
  };
}

/** Headers of a rendered page (the shared stylesheet). */
export const PAGE_HEADERS: Readonly<Record<string, string>> = pageHeadersFor(PAGE_STYLE);

/** A complete HTML document: `title` (escaped here), a body fragment already rendered and escaped, and its one stylesheet. */
export function htmlPage(title: string, bodyHtml: string, style: string = PAGE_STYLE): string {
  return [
    "<!doctype html>",
    '<html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(title)}</title>`,
    `<style>${style}</style>`,
    "</head><body>",
    bodyHtml,
    "</body></html>",
  ].join("\n");
}
