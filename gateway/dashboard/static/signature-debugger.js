// The Signature debugger tab: reads the form, runs signature-check.js in this page and
// shows the result. It makes one request, for the public rules file
// (/dashboard/signature-rules.json); the body, the header and the secret never leave
// the page. The secret field is cleared when the owner leaves the tab.

import { checkSignature, createMacEngine } from "./signature-check.js";

const $ = (id) => document.getElementById(id);
const el = window.dashboard.el;

// WebCrypto only exists in secure contexts (https, localhost); elsewhere the plain-JS HMAC runs.
const engine = createMacEngine(window.isSecureContext && window.crypto ? window.crypto.subtle : undefined);
let rulesPromise;
/** Set by openDebugger: focus the secret field once the tab shows. */
let focusSecret = false;

function loadRules() {
  rulesPromise ??= fetch("/dashboard/signature-rules.json", { cache: "no-store" }).then((res) => {
    if (!res.ok) throw new Error(`cannot load the signature rules (${res.status})`);
    return res.json();
  });
  return rulesPromise;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

document.addEventListener("dashboard:tab", (event) => {
  if (event.detail.tab === "debugger") {
    if ($("sig-now").value === "") $("sig-now").value = String(nowSeconds());
    // The server being debugged: the one selected on the dashboard (the owner may type another).
    if (event.detail.serverId) $("sig-server").value = event.detail.serverId;
    if (focusSecret) $("sig-secret").focus();
    focusSecret = false;
    return;
  }
  // Leaving the tab forgets the secret (as the secret boxes of the other tabs do).
  $("sig-secret").value = "";
});

/**
 * Opens the debugger filled with a request seen elsewhere on the dashboard (an attempt's
 * headers and body, a test exchange): `{scheme: "ingest"|"callback", header, body, t}`.
 * The owner adds the secret; `t` (when given) becomes the time to check against.
 */
function openDebugger(prefill) {
  document.querySelector(`input[name="sig-scheme"][value="${prefill.scheme === "callback" ? "callback" : "ingest"}"]`).checked = true;
  $("sig-header").value = prefill.header || "";
  $("sig-body").value = prefill.body || "";
  $("sig-now").value = String(prefill.t || nowSeconds());
  $("sig-result").replaceChildren();
  focusSecret = true;
  location.hash = "#debugger";
}
/** A "Check in the signature debugger" button for a request the page shows (`exchange` of the dashboard API). */
function debuggerButton(exchange) {
  const headers = Object.entries(exchange.request_headers || {});
  const find = (name) => (headers.find(([key]) => key.toLowerCase() === name) || [])[1];
  const header = find("x-service-signature");
  if (!header) return null;
  // Reward callbacks carry X-Service-Event; referral events to the ingest endpoint do not.
  const scheme = find("x-service-event") ? "callback" : "ingest";
  const t = Number((/(?:^|,)\s*t=(-?\d+)/.exec(header) || [])[1]) || undefined;
  return el(
    "button",
    { type: "button", class: "btn btn-small exchange-debug", onclick: () => openDebugger({ scheme, header, body: exchange.request_body, t }) },
    "Check in the signature debugger",
  );
}

window.signatureDebugger = Object.freeze({ open: openDebugger, button: debuggerButton });

$("sig-now-reset").addEventListener("click", () => ($("sig-now").value = String(nowSeconds())));

$("sig-clear").addEventListener("click", () => {
  for (const id of ["sig-header", "sig-body", "sig-secret"]) $(id).value = "";
  $("sig-result").replaceChildren();
});

$("sig-form").addEventListener("submit", (event) => {
  event.preventDefault();
  window.dashboard.run(event.submitter, runCheck);
});

async function runCheck() {
  const rules = await loadRules();
  const now = Number($("sig-now").value);
  const report = await checkSignature(
    {
      scheme: document.querySelector('input[name="sig-scheme"]:checked').value,
      header: $("sig-header").value,
      body: $("sig-body").value,
      secret: $("sig-secret").value,
      serverId: $("sig-server").value.trim(),
      nowSeconds: $("sig-now").value !== "" && Number.isFinite(now) ? now : nowSeconds(),
    },
    rules,
    engine,
  );
  render(report);
}

const VERDICTS = {
  valid: ["ok", "Signature valid"],
  stale: ["warn", "MAC matches, but t is stale"],
  mismatch: ["err", "Signature does not match"],
  refused: ["err", "Signature valid, but for another server: refused"],
  malformed: ["err", "Header is malformed"],
  unverified: ["", "Not verified: no secret given"],
};
const LEVELS = { ok: "OK", info: "Note", warn: "Warning", error: "Problem" };

function render(report) {
  const [kind, title] = VERDICTS[report.verdict];
  const answer = report.answer
    ? `The service would answer ${report.answer.status} "${report.answer.error}".`
    : report.refusal
      ? `Your receiver must refuse it and pay nothing; the shipped receivers answer ${report.refusal.status} "${report.refusal.error}".`
      : report.scheme === "ingest" && report.verdict === "valid"
        ? "The service would accept the signature."
        : "";
  const copyable = (id, label, value) =>
    value === null
      ? null
      : el(
          "div",
          { class: "sig-value" },
          el("div", { class: "label" }, label),
          el(
            "div",
            { class: "copy-row" },
            el("code", { id, class: "mono-box" }, value),
            el("button", { type: "button", class: "btn btn-small", dataset: { copy: id } }, "Copy"),
          ),
        );
  $("sig-result").replaceChildren(
    el(
      "p",
      { class: `sig-verdict sig-${kind || "none"}`, id: "sig-verdict", dataset: { verdict: report.verdict } },
      el("strong", {}, title),
      answer ? ` ${answer}` : "",
    ),
    el(
      "ul",
      { class: "findings", id: "sig-findings" },
      ...report.findings.map((f) =>
        el(
          "li",
          { class: `finding finding-${f.level}`, dataset: { part: f.part, level: f.level } },
          el("span", { class: "finding-level" }, `${LEVELS[f.level]} \u00b7 ${f.part}`),
          " ",
          f.message,
        ),
      ),
    ),
    report.canonical === null
      ? null
      : el(
          "div",
          { class: "sig-value" },
          el("div", { class: "label" }, `Canonical string "<t>.<body>" (${report.canonicalBytes} bytes as UTF-8)`),
          el("pre", { id: "sig-canonical", class: "mono-block" }, visible(report.canonical)),
        ),
    copyable("sig-expected", "Expected v1 (HMAC-SHA256, lower-case hex)", report.expectedHex),
    copyable("sig-expected-header", "Expected header", report.expectedHeader),
    el(
      "p",
      { class: "muted small" },
      `Computed in this page with ${report.engine === "webcrypto" ? "the browser's WebCrypto" : "a plain-JavaScript HMAC-SHA256 (WebCrypto needs https or localhost)"}.`,
    ),
  );
}

/** Shows carriage returns, tabs and a final newline, which are easy to miss and change the MAC. */
function visible(text) {
  return text.replace(/\r/g, "\u240d").replace(/\t/g, "\u2192\t").replace(/\n$/, "\u21b5\n");
}
