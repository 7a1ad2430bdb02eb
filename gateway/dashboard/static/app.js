// Referral dashboard: vanilla JS, no build step. Every call goes to /dashboard/api, either with
// the operator's bearer token kept in sessionStorage, or (an owner who opened a login link)
// with the HttpOnly session cookie plus the session's CSRF token in X-CSRF-Token.
// Data is put on the page with textContent only.
"use strict";

(() => {
  const API = "/dashboard/api";
  const TOKEN_KEY = "dashboard.token";
  const SERVER_KEY = "dashboard.server";
  const TABS = ["overview", "referrals", "integration", "deliveries", "hearts", "trends", "debugger", "goals", "alerts"];

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || "",
    /** An owner session's CSRF token (from GET /session; kept in memory only). */
    csrf: "",
    servers: [],
    // An alert's link names its server (`?server=<id>`): opening it picks that server.
    serverId: new URLSearchParams(location.search).get("server") || sessionStorage.getItem(SERVER_KEY) || "",
    tab: "overview",
    // An alert's link may name a delivery too (`&delivery=<id>#deliveries`): the deliveries tab opens its attempts.
    deliveryId: new URLSearchParams(location.search).get("delivery") || "",
  };

  // ---- small helpers -------------------------------------------------------------------

  const $ = (id) => document.getElementById(id);

  /** Creates an element; children are nodes or strings (set as text, never as HTML). */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "onclick") node.addEventListener("click", value);
      else if (key === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat(Number.POSITIVE_INFINITY)) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  /** ISO time -> "2026-11-21 22:39:05 UTC"; "-" when unset. */
  function fmtTime(iso) {
    if (!iso) return "\u2013";
    return iso
      .replace("T", " ")
      .replace(/\.\d+Z$/, "Z")
      .replace(/Z$/, " UTC");
  }

  /** A UTC time for a table cell: date and time wrap as two pieces, never inside one (the text is fmtTime's). */
  function fmtWhen(iso) {
    const text = fmtTime(iso);
    const space = text.indexOf(" ");
    if (space < 0) return text;
    return el("span", { class: "when" }, el("span", {}, text.slice(0, space)), " ", el("span", {}, text.slice(space + 1)));
  }

  /**
   * A disable reason as the service wrote it, with the time it happened: a reason that carries its own time
   * ("receiver answered 410 Gone at <ISO time>") is shown alone, so a notice never gives one moment twice in
   * two formats; otherwise "(since <time>)" is added. The reason itself is shown verbatim.
   */
  function reasonSince(reason, at) {
    const text = reason || "";
    if (/\d{4}-\d\d-\d\dT\d\d:\d\d/.test(text) || !at) return text;
    return `${text} (since ${fmtTime(at)})`;
  }

  function fmtRate(rate) {
    return `${(rate * 100).toFixed(1)}%`;
  }

  function badge(text, kind) {
    return el("span", { class: `badge${kind ? ` badge-${kind}` : ""}` }, text);
  }

  // withdrawn (pay-once mode: another transport paid) is a plain badge: neither a success nor a failure of this delivery.
  const DELIVERY_STATUS_KINDS = { delivered: "ok", pending: "warn", failed: "err" };
  /** A delivery's status as a badge (deliveries tab, the test callback's delivery, the hearts list). */
  const deliveryBadge = (status) => badge(status, DELIVERY_STATUS_KINDS[status]);

  /** What releases a held delivery, by the service's `held_reason` (services/delivery/domain/held-reason.ts). */
  const RELEASED_BY = {
    no_callback_url: "held until a callback URL is set (Integration tab)",
    endpoint_disabled: "held until callbacks are re-enabled (Integration tab)",
    endpoint_deleted: "not sent: its endpoint was deleted",
    votifier_off: "held until Votifier is set up (Integration tab)",
  };

  /**
   * What the owner sees of a delivery's state (Deliveries tab, a delivery's detail, the Hearts list). A pending
   * delivery that nothing will send carries a `held_reason` from the service and is shown as held, with what
   * releases it instead of a next attempt: the dispatcher leaves it pending and due, so its next attempt time is
   * in the past and means nothing (the stored status stays pending).
   */
  function deliveryState(d) {
    if (d.status !== "pending") return { label: d.status, kind: DELIVERY_STATUS_KINDS[d.status], next: "\u2013", nextTime: "\u2013" };
    if (d.held_reason) {
      const releasedBy = RELEASED_BY[d.held_reason] || `held (${d.held_reason})`;
      return { label: "held", kind: "warn", next: releasedBy, nextTime: releasedBy };
    }
    if (!d.next_attempt_at) return { label: "pending", kind: "warn", next: "\u2013", nextTime: "\u2013" };
    return { label: "pending", kind: "warn", next: fmtWhen(d.next_attempt_at), nextTime: fmtTime(d.next_attempt_at) };
  }

  function statusBadge(code) {
    if (code === null || code === undefined) return badge("no response", "err");
    return badge(String(code), code >= 200 && code < 300 ? "ok" : "err");
  }

  function emptyRow(tbody, columns, text) {
    tbody.replaceChildren(el("tr", {}, el("td", { class: "empty", colspan: columns }, text)));
  }

  // ---- messages ------------------------------------------------------------------------

  let flashTimer;
  function flash(kind, text) {
    clearTimeout(flashTimer);
    const box = $("flash");
    box.className = `flash flash-${kind}`;
    $("flash-text").textContent = text;
    box.hidden = false;
    if (kind === "ok") flashTimer = setTimeout(() => (box.hidden = true), 5000);
  }
  const showError = (text) => flash("error", text);
  const showOk = (text) => flash("ok", text);

  // ---- API -----------------------------------------------------------------------------

  class ApiFailure extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  /** Calls the dashboard API; throws ApiFailure with the API's own error text. */
  async function api(method, path, body, token) {
    const bearer = token === undefined ? state.token : token;
    let res;
    try {
      res = await fetch(API + path, {
        method,
        credentials: "same-origin",
        headers: {
          ...(bearer ? { authorization: `Bearer ${bearer}` } : state.csrf ? { "x-csrf-token": state.csrf } : {}),
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
      });
    } catch (error) {
      throw new ApiFailure(0, `cannot reach the dashboard API (${error.message})`);
    }
    let data = null;
    try {
      data = await res.json();
    } catch (_) {
      data = null;
    }
    if (!res.ok) {
      const message = data && typeof data.error === "string" ? data.error : `${res.status} ${res.statusText}`;
      if (res.status === 401 && token === undefined)
        signOut(state.csrf ? `Your session ended (${message}).` : `Your token was rejected (${message}). Sign in again.`);
      throw new ApiFailure(res.status, message);
    }
    return data;
  }

  /** The error text of a failed action, with its status: "Error 400: <the API's text>". */
  const errorText = (error) => `Error${error.status ? ` ${error.status}` : ""}: ${error.message}`;

  /**
   * Where a control's error is shown: right after the block that holds the control (its form, its card
   * head, its row of actions), so the error sits beside the button that caused it, not in a banner above.
   */
  function errorAnchor(button) {
    return button.closest(".card-head, form, .actions, .copy-row, .pager") || button.parentElement;
  }

  /** Shows `text` beside `button` (one error per control block), or removes it when `text` is empty. */
  function showControlError(button, text) {
    const anchor = errorAnchor(button);
    const next = anchor.nextElementSibling;
    const existing = next?.classList.contains("control-error") ? next : null;
    if (!text) return existing?.remove();
    const box = existing || el("p", { class: "msg msg-error control-error", role: "alert" });
    box.textContent = text;
    if (!existing) anchor.after(box);
  }

  /**
   * Runs an action with its button disabled. A failure of a button's action is shown beside that button
   * (unless the action already showed it in its own result box); a failure without a button (a load) goes
   * to the flash.
   */
  async function run(button, action) {
    if (button) {
      button.disabled = true;
      showControlError(button, "");
    }
    try {
      await action();
    } catch (error) {
      // Failure policy: an expired session signs out (api() says why); anything else is shown once, where it happened.
      if (error instanceof ApiFailure && error.status === 401) return;
      if (error.shown) return;
      if (button) showControlError(button, errorText(error));
      else showError(errorText(error));
    } finally {
      if (button) button.disabled = false;
    }
  }

  const serverPath = (suffix) => `/servers/${encodeURIComponent(state.serverId)}${suffix || ""}`;
  const currentServer = () => state.servers.find((s) => s.id === state.serverId);

  // ---- sign in / out -------------------------------------------------------------------

  function showLogin(message) {
    $("app").hidden = true;
    $("session-controls").hidden = true;
    $("login").hidden = false;
    $("login-error").hidden = !message;
    $("login-error").textContent = message || "";
    $("token-input").focus();
  }

  function signOut(message) {
    // An owner session ends on the server too (the cookie is HttpOnly).
    // Failure policy: a failed logout call still signs out here; the session then ends at its expiry or by revocation.
    if (state.csrf && !message) api("POST", "/session/logout", {}).catch(() => undefined);
    state.token = "";
    state.csrf = "";
    $("session-owner").textContent = "";
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin(message);
  }

  async function signIn(token) {
    const session = await api("GET", "/session", undefined, token);
    state.token = token;
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    if (session.role === "owner") {
      state.csrf = session.csrf_token;
      $("session-owner").textContent = `Signed in as ${session.owner.display_name || session.owner.id}`;
    }
    $("login").hidden = true;
    $("app").hidden = false;
    $("session-controls").hidden = false;
    await loadServers();
    selectTab(tabFromHash());
  }

  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token-input").value.trim();
    const button = $("sign-in");
    button.disabled = true;
    signIn(token)
      .then(() => ($("token-input").value = ""))
      .catch((error) => {
        const prefix = error.status === 401 ? "That token was not accepted" : "Cannot sign in";
        showLogin(`${prefix}: ${error.message}`);
      })
      .finally(() => (button.disabled = false));
  });
  $("sign-out").addEventListener("click", () => signOut(""));

  // ---- servers and the picker ----------------------------------------------------------

  async function loadServers() {
    const { servers } = await api("GET", "/servers");
    state.servers = servers;
    if (!servers.some((s) => s.id === state.serverId)) setServer(servers.length > 0 ? servers[servers.length - 1].id : "");
    renderPicker();
    renderServers();
  }

  function setServer(id) {
    if (id !== state.serverId) {
      hideSecret("referral-secret-box");
      hideSecret("callback-secret-box");
      hideSecret("pull-secret-box");
      hideSecret("claim-secret-box");
      hideSecret("endpoint-secret-box");
      closeEndpointForm();
      $("endpoint-test-result").replaceChildren();
      $("delivery-detail").hidden = true;
      for (const result of ["test-event-result", "test-callback-result", "test-vote-result"]) $(result).replaceChildren();
      $("test-callback-delivery").hidden = true;
      $("endpoint-banner").dataset.empty = "true";
      $("endpoint-banner").hidden = true;
    }
    state.serverId = id;
    state.deliveryId = "";
    syncIntegrationFields();
    if (id) sessionStorage.setItem(SERVER_KEY, id);
    else sessionStorage.removeItem(SERVER_KEY);
  }

  function renderPicker() {
    const picker = $("server-picker");
    if (state.servers.length === 0) {
      picker.replaceChildren(el("option", { value: "" }, "No servers yet"));
      picker.disabled = true;
      return;
    }
    picker.disabled = false;
    picker.replaceChildren(...state.servers.map((s) => el("option", { value: s.id, selected: s.id === state.serverId }, s.name)));
    picker.value = state.serverId;
  }

  $("server-picker").addEventListener("change", (event) => {
    setServer(event.target.value);
    renderServers();
    selectTab(state.tab);
  });

  function renderServers() {
    const tbody = $("servers-table").tBodies[0];
    if (state.servers.length === 0) return emptyRow(tbody, 6, "No servers yet. Create one above.");
    tbody.replaceChildren(
      ...state.servers.map((s) =>
        el(
          "tr",
          { class: s.id === state.serverId ? "selected" : "" },
          el("td", {}, el("strong", {}, s.name)),
          el("td", {}, el("code", {}, s.id)),
          el("td", {}, s.referrals_enabled ? badge("enabled", "ok") : badge("disabled")),
          el("td", {}, s.callback_disabled_reason ? badge("disabled", "err") : s.callback_url ? badge("set", "ok") : badge("not set")),
          el("td", {}, fmtTime(s.created_at)),
          el("td", { class: "row-actions" }, el("button", { type: "button", class: "btn btn-small", onclick: () => openServer(s.id) }, "Open")),
        ),
      ),
    );
  }

  function openServer(id) {
    setServer(id);
    renderPicker();
    renderServers();
    location.hash = "#referrals";
  }

  $("create-server-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run($("create-server"), async () => {
      const { server } = await api("POST", "/servers", {
        name: $("new-server-name").value,
        registration_url: $("new-server-registration-url").value,
      });
      $("new-server-name").value = "";
      $("new-server-registration-url").value = "";
      setServer(server.id);
      await loadServers();
      showOk(`Server "${server.name}" created (id ${server.id}).`);
    });
  });
  $("refresh-servers").addEventListener("click", (event) => run(event.target, loadServers));

  /** Replaces the server in the local list after an update. */
  function updateServer(server) {
    state.servers = state.servers.map((s) => (s.id === server.id ? server : s));
    renderServers();
  }

  // ---- tabs ----------------------------------------------------------------------------

  function tabFromHash() {
    const name = location.hash.replace(/^#/, "");
    return TABS.includes(name) ? name : "overview";
  }

  function selectTab(tab) {
    if (tab !== state.tab) {
      // Leaving a tab clears its messages and any secret still on screen.
      $("flash").hidden = true;
      hideSecret("referral-secret-box");
      hideSecret("callback-secret-box");
      hideSecret("pull-secret-box");
      hideSecret("claim-secret-box");
    }
    state.tab = tab;
    for (const button of document.querySelectorAll(".tab")) button.setAttribute("aria-selected", String(button.dataset.tab === tab));
    showSelectedTab();
    syncNotices();
    const panel = $(`tab-${tab}`);
    const needsServer = panel.classList.contains("needs-server");
    for (const p of document.querySelectorAll(".tab-panel")) p.hidden = p !== panel || (needsServer && !state.serverId);
    $("no-server").hidden = !(needsServer && !state.serverId);
    // Tabs served by the ES modules (insights.js, signature-debugger.js) load on this event.
    document.dispatchEvent(new CustomEvent("dashboard:tab", { detail: { tab, serverId: state.serverId } }));
    if (needsServer && !state.serverId) return;
    const loaders = {
      overview: loadServers,
      referrals: loadReferrals,
      integration: loadIntegration,
      deliveries: loadDeliveries,
      hearts: loadRanking,
      alerts: loadAlerts,
    };
    if (loaders[tab]) run(null, loaders[tab]);
    // The deliveries tab refreshes the notice with its own health card.
    if (tab !== "deliveries") run(null, loadEndpointBanner);
  }

  for (const button of document.querySelectorAll(".tab")) {
    button.addEventListener("click", () => {
      if (location.hash === `#${button.dataset.tab}`) selectTab(button.dataset.tab);
      else location.hash = `#${button.dataset.tab}`;
    });
  }
  window.addEventListener("hashchange", () => {
    if (!$("app").hidden) selectTab(tabFromHash());
  });

  // A narrow screen scrolls the tab bar: a fade with an arrow marks each side that hides tabs.
  const tabBar = document.querySelector(".tabs");
  function updateTabCues() {
    const wrap = $("tabs-wrap");
    const hiddenRight = tabBar.scrollWidth - tabBar.clientWidth - tabBar.scrollLeft;
    wrap.classList.toggle("more-left", tabBar.scrollLeft > 1);
    wrap.classList.toggle("more-right", hiddenRight > 1);
  }
  /** Scrolls the selected tab fully into the bar's view (clear of the fades), then updates the cues. */
  function showSelectedTab() {
    const selected = tabBar.querySelector('.tab[aria-selected="true"]');
    if (selected) {
      const FADE_PX = 28;
      const bar = tabBar.getBoundingClientRect();
      const box = selected.getBoundingClientRect();
      if (box.right > bar.right - FADE_PX) tabBar.scrollLeft += box.right - bar.right + FADE_PX;
      else if (box.left < bar.left + FADE_PX) tabBar.scrollLeft -= bar.left + FADE_PX - box.left;
    }
    updateTabCues();
  }
  tabBar.addEventListener("scroll", updateTabCues, { passive: true });
  window.addEventListener("resize", updateTabCues);

  // On a phone a table's rows stack: each cell shows its column's name (data-label, from the header row).
  function labelCells(table) {
    const names = [...table.tHead.rows[0].cells].map((th) => th.textContent.trim());
    for (const row of table.tBodies[0].rows) for (const cell of row.cells) cell.dataset.label = names[cell.cellIndex] ?? "";
  }
  for (const table of document.querySelectorAll("table.table-stack")) {
    labelCells(table);
    new MutationObserver(() => labelCells(table)).observe(table.tBodies[0], { childList: true });
  }
  // A table wider than its card scrolls sideways: .scrolls shows a shadow beside the row buttons that stay in view.
  const wrapSizes = new ResizeObserver((entries) => {
    for (const entry of entries) {
      const wrap = entry.target.closest(".table-wrap");
      if (wrap) wrap.classList.toggle("scrolls", wrap.scrollWidth > wrap.clientWidth + 1);
    }
  });
  for (const wrap of document.querySelectorAll(".table-wrap")) {
    wrapSizes.observe(wrap);
    new MutationObserver(() => {
      const table = wrap.querySelector("table");
      if (table) wrapSizes.observe(table);
    }).observe(wrap, { childList: true });
    const table = wrap.querySelector("table");
    if (table) wrapSizes.observe(table);
  }

  // ---- secrets (shown once) ------------------------------------------------------------

  /** Shows a secret value with a note; it stays only until hidden or the tab is reloaded. */
  function showSecret(boxId, title, note, value, secret) {
    const box = $(boxId);
    const valueId = `${boxId}-value`;
    box.replaceChildren(
      el("p", {}, el("strong", {}, title), secret ? ` kid ${secret.kid}` : "", secret?.expires_at ? ` \u00b7 expires ${fmtTime(secret.expires_at)}` : ""),
      el("p", { class: "muted" }, note),
      el(
        "div",
        { class: "copy-row" },
        el("code", { id: valueId, class: "mono-box secret-value" }, value),
        el("button", { type: "button", class: "btn btn-small", dataset: { copy: valueId } }, "Copy"),
        el("button", { type: "button", class: "btn btn-small btn-quiet", onclick: () => hideSecret(boxId) }, "Hide"),
      ),
    );
    box.hidden = false;
  }

  function hideSecret(boxId) {
    const box = $(boxId);
    box.replaceChildren();
    box.hidden = true;
  }

  document.addEventListener("click", (event) => {
    const target = event.target.closest("[data-copy]");
    if (!target) return;
    const text = $(target.dataset.copy).textContent;
    const done = () => showOk("Copied to the clipboard.");
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, () => selectText(target.dataset.copy));
    } else {
      selectText(target.dataset.copy);
    }
  });

  /** Without a clipboard API (plain http), select the text so the owner can press Ctrl+C. */
  function selectText(id) {
    const range = document.createRange();
    range.selectNodeContents($(id));
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    showOk("Selected: press Ctrl+C (Cmd+C) to copy.");
  }

  // ---- exchanges (test callback, test referral event) ----------------------------------

  /**
   * The one exchange layout: what was sent (left) and what came back (right). The test callback, the
   * test referral event, the test vote and a stored delivery attempt all show through it.
   * request: { title, line, parts }; response: { title, statusCode, ok, latencyMs, error, errorClass, parts }.
   * A transport without status codes (Votifier) leaves statusCode undefined: the outcome alone shows.
   */
  function exchangeView({ variant, request, response }) {
    return el(
      "div",
      { class: variant ? `exchange ${variant}` : "exchange" },
      el(
        "div",
        { class: "exchange-part exchange-request" },
        el("h3", {}, request.title),
        el("p", { class: "exchange-line mono" }, request.line),
        request.parts,
      ),
      el(
        "div",
        { class: "exchange-part exchange-response" },
        el("h3", {}, response.title),
        el(
          "p",
          { class: "exchange-line" },
          response.statusCode === undefined ? null : ["Status ", el("span", { class: "exchange-status" }, statusBadge(response.statusCode)), " "],
          response.ok ? badge("success", "ok") : badge("failed", "err"),
          ` \u00b7 ${response.latencyMs} ms`,
        ),
        response.error ? el("p", { class: `exchange-line cell-error ${response.errorClass ?? "exchange-error"}` }, response.error) : null,
        response.parts,
      ),
    );
  }

  /** A labelled block of exchange text: the label above, the text as sent or received. */
  const exchangeText = (label, className, text) => [el("div", { class: "label" }, label), el("pre", { class: className }, text)];

  /** A received body as shown: an empty one says so. */
  const shownBody = (body) => (body === "" ? "(empty)" : body);

  const headerLines = (headers) =>
    Object.entries(headers || {})
      .map(([name, value]) => `${name}: ${value}`)
      .join("\n");

  /** A test callback's or test referral event's exchange (sent now, not stored). */
  function renderExchange(containerId, exchange) {
    $(containerId).replaceChildren(
      exchangeView({
        request: {
          title: "Request",
          line: `${exchange.method} ${exchange.url}`,
          parts: [
            exchangeText("Headers", "exchange-headers", headerLines(exchange.request_headers)),
            exchangeText("Body", "exchange-body", exchange.request_body),
            exchangeText("Canonical string (signed: <t>.<body>)", "exchange-canonical", exchange.canonical_string),
            window.signatureDebugger ? window.signatureDebugger.button(exchange) : null,
          ],
        },
        response: {
          title: "Response",
          statusCode: exchange.status_code,
          ok: exchange.ok,
          latencyMs: exchange.latency_ms,
          error: exchange.error,
          parts: exchangeText("Body", "exchange-response-body", shownBody(exchange.response_body)),
        },
      }),
    );
  }

  /**
   * A "send test ..." button's work: "Sending..." in its result box, then what send() shows there,
   * or the error in the box.
   */
  async function sendTest(resultId, send) {
    $(resultId).replaceChildren(el("p", { class: "muted" }, "Sending\u2026"));
    try {
      await send();
    } catch (error) {
      // Failure policy: shown where the result would be (beside its button), then rethrown marked as shown so run() does not repeat it.
      $(resultId).replaceChildren(el("p", { class: "msg msg-error", role: "alert" }, errorText(error)));
      error.shown = true;
      throw error;
    }
  }

  // ---- referrals tab -------------------------------------------------------------------

  async function loadReferrals() {
    const [{ server }, { secrets }] = await Promise.all([api("GET", serverPath()), api("GET", serverPath("/referral-secrets"))]);
    updateServer(server);
    renderReferralSettings(server);
    renderSecrets(secrets);
    await Promise.all([loadFunnel(), loadLeaderboards(), loadReviewMode(), loadReferralList(false)]);
  }

  function renderReferralSettings(server) {
    const status = $("referrals-status");
    status.textContent = server.referrals_enabled ? "enabled" : "disabled";
    status.className = `badge ${server.referrals_enabled ? "badge-ok" : ""}`;
    $("toggle-referrals").textContent = server.referrals_enabled ? "Disable referrals" : "Enable referrals";
    $("registration-url").value = server.registration_url;
    $("attribution-window-days").value = String(server.attribution_window_days);
    $("lock-days").value = String(server.lock_days);
    $("referral-link").textContent = `${location.origin}/r/${server.id}?referrer=<player>`;
  }

  function renderSecrets(secrets) {
    const tbody = $("secrets-table").tBodies[0];
    if (secrets.length === 0) return emptyRow(tbody, 6, "No referral secrets yet. Create one to start accepting events.");
    const kinds = { active: "ok", expiring: "warn", expired: "", revoked: "err" };
    tbody.replaceChildren(
      ...secrets.map((s) =>
        el(
          "tr",
          {},
          el("td", {}, el("code", {}, s.kid)),
          el("td", {}, fmtTime(s.created_at)),
          el("td", {}, fmtTime(s.expires_at)),
          el("td", {}, fmtTime(s.revoked_at)),
          el("td", {}, badge(s.status, kinds[s.status])),
          el(
            "td",
            { class: "row-actions" },
            s.revoked_at ? null : el("button", { type: "button", class: "btn btn-small", onclick: (e) => revealReferralSecret(e.target, s.kid) }, "Reveal"),
            s.revoked_at
              ? null
              : el("button", { type: "button", class: "btn btn-small btn-danger", onclick: (e) => revokeReferralSecret(e.target, s.kid) }, "Revoke"),
          ),
        ),
      ),
    );
  }

  async function reloadSecrets() {
    const { secrets } = await api("GET", serverPath("/referral-secrets"));
    renderSecrets(secrets);
  }

  function revealReferralSecret(button, kid) {
    run(button, async () => {
      const { value } = await api("POST", serverPath(`/referral-secrets/${encodeURIComponent(kid)}/reveal`));
      showSecret("referral-secret-box", "Referral secret", "Revealed on your request. Keep it on your backend only.", value, { kid });
    });
  }

  function revokeReferralSecret(button, kid) {
    if (!confirm(`Revoke secret ${kid}? Requests signed with it are rejected at once.`)) return;
    run(button, async () => {
      await api("POST", serverPath(`/referral-secrets/${encodeURIComponent(kid)}/revoke`));
      await reloadSecrets();
      showOk(`Secret ${kid} revoked.`);
    });
  }

  $("toggle-referrals").addEventListener("click", (event) =>
    run(event.target, async () => {
      const enabled = !currentServer().referrals_enabled;
      const { server } = await api("PUT", serverPath("/referrals"), { enabled });
      updateServer(server);
      renderReferralSettings(server);
      showOk(enabled ? "Referrals enabled." : "Referrals disabled.");
    }),
  );

  $("registration-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run(event.submitter, async () => {
      const { server } = await api("PUT", serverPath("/registration-url"), { registration_url: $("registration-url").value });
      updateServer(server);
      renderReferralSettings(server);
      showOk("Registration URL saved.");
    });
  });

  $("referral-settings-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run(event.submitter, async () => {
      const { server } = await api("PUT", serverPath("/referral-settings"), {
        attribution_window_days: Number($("attribution-window-days").value),
        lock_days: Number($("lock-days").value),
      });
      updateServer(server);
      renderReferralSettings(server);
      showOk("Referral settings saved.");
    });
  });

  $("create-secret").addEventListener("click", (event) =>
    run(event.target, async () => {
      const { secret, value } = await api("POST", serverPath("/referral-secrets"));
      showSecret("referral-secret-box", "New referral secret", "Shown once: copy it now. Later you can reveal it on purpose.", value, secret);
      await reloadSecrets();
    }),
  );

  function graceSeconds(inputId) {
    const hours = Number($(inputId).value);
    if (!Number.isFinite(hours) || hours < 0) throw new Error("grace must be a non-negative number of hours");
    return Math.round(hours * 3600);
  }

  $("rotate-secret").addEventListener("click", (event) =>
    run(event.target, async () => {
      const { secret, value } = await api("POST", serverPath("/referral-secrets/rotate"), { grace_seconds: graceSeconds("rotate-grace-hours") });
      showSecret(
        "referral-secret-box",
        "New referral secret (rotation)",
        "Shown once: copy it now. Older secrets stay valid for the grace period.",
        value,
        secret,
      );
      await reloadSecrets();
    }),
  );

  $("send-test-event").addEventListener("click", (event) =>
    run(event.target, () =>
      sendTest("test-event-result", async () => {
        const { exchange } = await api("POST", serverPath("/test-referral-event"), { event: $("test-event-type").value });
        renderExchange("test-event-result", exchange);
      }),
    ),
  );

  async function loadFunnel() {
    const { funnel } = await api("GET", `${serverPath("/funnel")}?scope=${$("funnel-scope").value}`);
    const stat = (label, value) => el("div", { class: "stat" }, el("div", { class: "stat-value" }, String(value)), el("div", { class: "stat-label" }, label));
    $("funnel").replaceChildren(
      stat("Clicks", funnel.clicks),
      stat("Registered", funnel.registered),
      stat("Qualified", funnel.qualified),
      stat("Reversed", funnel.reversed),
      el(
        "div",
        { class: "stat-rate" },
        el("span", {}, "Click \u2192 register ", el("strong", {}, fmtRate(funnel.click_to_register_rate))),
        el("span", {}, "Register \u2192 qualify ", el("strong", {}, fmtRate(funnel.register_to_qualify_rate))),
        el("span", {}, "Reversal rate ", el("strong", {}, fmtRate(funnel.reversal_rate))),
      ),
      // The reversal records behind "Reversed", by reason (a clawback kept the referrer's credit).
      ...funnel.reversals_by_reason.map((r) => stat(`Reversed: ${r.reason || "no reason"}${r.clawbacks > 0 ? ` (${r.clawbacks} clawback)` : ""}`, r.count)),
    );
  }
  $("funnel-scope").addEventListener("change", () => run(null, loadFunnel));

  async function loadLeaderboards() {
    const [all, month] = await Promise.all([api("GET", `${serverPath("/leaderboard")}?scope=all`), api("GET", `${serverPath("/leaderboard")}?scope=month`)]);
    renderLeaderboard("leaderboard-all", all.entries);
    renderLeaderboard("leaderboard-month", month.entries);
    $("leaderboard-month-period").textContent = `(${month.period})`;
  }

  function renderLeaderboard(containerId, entries) {
    const table = el(
      "table",
      { class: "table" },
      el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "Referrer"), el("th", {}, "Credits"), el("th", {}, "Reversed"))),
    );
    const tbody = el("tbody");
    table.append(tbody);
    if (entries.length === 0) emptyRow(tbody, 4, "No qualified referrals yet.");
    else tbody.append(...entries.map((e) => el("tr", {}, el("td", {}, e.rank), el("td", {}, e.referrer), el("td", {}, e.credits), el("td", {}, e.reversed))));
    $(containerId).replaceChildren(table);
  }

  // ---- referral list and review (Referrals tab) ----------------------------------------

  let referralsPageToken = null;

  async function loadReviewMode() {
    const { mode } = await api("GET", serverPath("/referral-review"));
    $("review-mode").value = mode;
  }
  $("review-mode").addEventListener("change", (event) =>
    run(event.target, async () => {
      const { mode } = await api("PUT", serverPath("/referral-review"), { mode: $("review-mode").value });
      showOk(`Anti-abuse is now ${mode}.`);
    }),
  );

  /** The list's filters as a query string (the export uses the same). */
  function referralQuery() {
    const params = new URLSearchParams();
    if ($("referral-state").value) params.set("state", $("referral-state").value);
    const review = $("referral-review").value;
    if (review === "flagged") params.set("flagged", "true");
    else if (review) params.set("review", review);
    if ($("referral-referrer").value.trim()) params.set("referrer", $("referral-referrer").value.trim());
    return params;
  }

  const REVIEW_KINDS = { none: "", held: "warn", approved: "ok", declined: "err" };

  async function loadReferralList(more) {
    const params = referralQuery();
    if (more && referralsPageToken) params.set("page_token", referralsPageToken);
    const page = await api("GET", `${serverPath("/referrals")}?${params}`);
    const tbody = $("referrals-table").tBodies[0];
    const rows = page.referrals.map((r) =>
      el(
        "tr",
        { dataset: { referralId: r.id } },
        el("td", {}, fmtWhen(r.registered_at)),
        el("td", {}, r.referrer),
        el("td", {}, r.referee),
        el("td", {}, r.state),
        el("td", {}, r.signals.length === 0 ? "\u2013" : r.signals.map((sig) => el("code", { class: "signal" }, sig.code))),
        el("td", {}, badge(r.review === "none" ? "not flagged" : r.review, REVIEW_KINDS[r.review])),
        el("td", {}, r.counted ? "yes" : "no"),
        el(
          "td",
          { class: "row-actions" },
          el("button", { type: "button", class: "btn btn-small", onclick: (e) => run(e.target, () => showReferral(r.id)) }, "Details"),
          reviewButtons(r),
        ),
      ),
    );
    if (!more) tbody.replaceChildren(...rows);
    else tbody.append(...rows);
    const filtered = params.get("state") || params.get("review") || params.get("flagged") || params.get("referrer");
    if (!more && rows.length === 0)
      emptyRow(
        tbody,
        8,
        filtered
          ? "No referrals with these filters. Set State and Review to Any and clear Referrer to see every referral."
          : "No referrals yet. Put your referral link (its format is above) where players invite friends; each player your backend registers shows here.",
      );
    referralsPageToken = page.next_page_token;
    $("referrals-more").hidden = !page.next_page_token;
  }

  /** Approve / Decline buttons of a flagged referral (an unflagged one is not reviewed). */
  function reviewButtons(r) {
    if (r.review === "none") return null;
    return [
      r.review === "approved"
        ? null
        : el("button", { type: "button", class: "btn btn-small btn-primary", onclick: (e) => reviewReferral(e.target, r.id, "approve") }, "Approve"),
      r.review === "declined"
        ? null
        : el("button", { type: "button", class: "btn btn-small btn-danger", onclick: (e) => reviewReferral(e.target, r.id, "decline") }, "Decline"),
    ];
  }

  function reviewReferral(button, referralId, action) {
    return run(button, async () => {
      const { referral } = await api("POST", serverPath(`/referrals/${encodeURIComponent(referralId)}/review`), { action });
      showOk(`Referral of ${referral.referee} ${referral.review}.`);
      await Promise.all([loadReferralList(false), loadLeaderboards()]);
      if (!$("referral-detail").hidden && $("referral-detail").dataset.referralId === referralId) await showReferral(referralId);
    });
  }

  async function showReferral(referralId) {
    const { referral: r, events } = await api("GET", serverPath(`/referrals/${encodeURIComponent(referralId)}`));
    const box = $("referral-detail");
    box.dataset.referralId = referralId;
    box.replaceChildren(
      el("h3", {}, `Referral of ${r.referee} by ${r.referrer}`),
      el(
        "p",
        {},
        "State ",
        el("strong", {}, r.state),
        ", review ",
        badge(r.review, REVIEW_KINDS[r.review]),
        r.reviewed_at ? ` (${fmtTime(r.reviewed_at)})` : "",
        r.counted ? ", counted" : ", not counted",
      ),
      el("h4", {}, "Signals"),
      r.signals.length === 0
        ? el("p", { class: "muted" }, "None.")
        : el(
            "ul",
            { class: "signals" },
            r.signals.map((sig) => el("li", {}, el("code", {}, sig.code), " ", JSON.stringify(sig.details))),
          ),
      el("h4", {}, "Events"),
      el(
        "table",
        { class: "table" },
        el("thead", {}, el("tr", {}, el("th", {}, "Received"), el("th", {}, "Event"), el("th", {}, "server_event_id"), el("th", {}, "Outcome"))),
        el(
          "tbody",
          {},
          events.map((e) =>
            el("tr", {}, el("td", {}, fmtWhen(e.received_at)), el("td", {}, e.type), el("td", {}, el("code", {}, e.server_event_id)), el("td", {}, e.outcome)),
          ),
        ),
      ),
      el("div", { class: "actions" }, reviewButtons(r)),
    );
    box.hidden = false;
  }

  /** Saves an API answer that is a file (an export) as `filename`; an error answer throws ApiFailure with the API's text. */
  async function download(res, filename) {
    if (!res.ok) {
      const data = await res.json().catch(() => null);
      throw new ApiFailure(res.status, data && typeof data.error === "string" ? data.error : `${res.status} ${res.statusText}`);
    }
    const url = URL.createObjectURL(await res.blob());
    const link = el("a", { href: url, download: filename });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }

  /** Downloads the filtered referrals (the API answers the file itself). */
  async function exportReferrals(format) {
    const params = referralQuery();
    params.set("format", format);
    const res = await fetch(`${API}${serverPath("/referrals/export")}?${params}`, {
      credentials: "same-origin",
      headers: state.token ? { authorization: `Bearer ${state.token}` } : {},
      cache: "no-store",
    });
    await download(res, `referrals.${format}`);
    if (res.headers.get("x-export-truncated") === "true") showError("The export holds the first 10,000 referrals only; narrow the filter.");
  }

  // ---- a voter's data: export and erasure ------------------------------------------------

  /** The voter the form names; null (and a message) when no server is picked or the key is empty. */
  function voterDataRequest() {
    const key = $("voter-data-key").value.trim();
    if (!state.serverId) {
      showError("Pick a server first.");
      return null;
    }
    if (key === "") {
      showError("Give the voter's username or id.");
      return null;
    }
    return { key_kind: $("voter-data-kind").value, key };
  }

  /** Downloads the voter's export (a POST: the voter's name travels in the body, never in a URL). */
  async function exportVoterData(req) {
    const res = await fetch(`${API}${serverPath("/voter-data/export")}`, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "content-type": "application/json",
        ...(state.token ? { authorization: `Bearer ${state.token}` } : state.csrf ? { "x-csrf-token": state.csrf } : {}),
      },
      body: JSON.stringify(req),
      cache: "no-store",
    });
    await download(res, `voter-data-${state.serverId}.json`);
  }

  $("voter-data-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const req = voterDataRequest();
    if (!req) return;
    try {
      await exportVoterData(req);
      $("voter-data-result").textContent = "Export downloaded.";
    } catch (error) {
      showError(errorText(error));
    }
  });

  $("voter-data-erase").addEventListener("click", async () => {
    const req = voterDataRequest();
    if (!req) return;
    if (
      !confirm(
        `Erase the voter ${req.key} on this server? Their name and ids become an anonymous tombstone and their addresses are dropped. This cannot be undone.`,
      )
    ) {
      $("voter-data-result").textContent = "Not erased.";
      return;
    }
    try {
      const erased = await api("POST", serverPath("/voter-data/erase"), { ...req, confirm: true });
      const hearts = erased.counts.hearts || 0;
      $("voter-data-result").textContent = `Erased: ${hearts} heart${hearts === 1 ? "" : "s"}; the voter now reads as ${erased.tombstone}.`;
      $("voter-data-key").value = "";
    } catch (error) {
      showError(errorText(error));
    }
  });

  $("referral-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    run($("referral-search"), () => loadReferralList(false));
  });
  $("referrals-more").addEventListener("click", (event) => run(event.target, () => loadReferralList(true)));
  $("export-csv").addEventListener("click", (event) => run(event.target, () => exportReferrals("csv")));
  $("export-json").addEventListener("click", (event) => run(event.target, () => exportReferrals("json")));

  // ---- integration tab -----------------------------------------------------------------

  /** The Integration tab's last render: which server, and a count (loadIntegration drops an answer older than a render). */
  const integrationRendered = { serverId: "", count: 0 };

  /**
   * The Integration tab's controls are disabled while it shows another server than the picked one (between a pick and
   * its settings load): an owner cannot type into, or save, the previous server's values under the new server.
   */
  function syncIntegrationFields() {
    $("integration-fields").disabled = integrationRendered.serverId !== state.serverId;
  }

  async function loadIntegration() {
    const before = integrationRendered.count;
    const [{ server }] = await Promise.all([api("GET", serverPath()), loadEndpoints()]);
    // A save of this server answered while this load was on its way and rendered newer settings: this answer is older.
    if (integrationRendered.count !== before && integrationRendered.serverId === server.id) return;
    // Another server was picked meanwhile: its own load renders it.
    if (server.id !== state.serverId) return;
    updateServer(server);
    renderIntegration(server);
  }

  // ---- callback endpoints (Integration tab) ---------------------------------------------

  /** What each payload version offered by the service adds, as the endpoint form's choices say it. */
  const PAYLOAD_VERSION_LABELS = {
    1: "1: the contract's body",
    2: "2: adds cast time, next eligible time, platform ids, account id",
    3: "3: version 2 plus the reward rules' weight, month and all-time totals, reward streak",
  };
  const endpointState = { endpoints: [], eventTypes: [], payloadVersions: [1], editing: "" };
  const endpointPath = (id, suffix) => serverPath(`/endpoints/${encodeURIComponent(id)}${suffix || ""}`);

  /** Lists the picked server's endpoints (the default first) with each one's health. */
  async function loadEndpoints() {
    const { endpoints, event_types, payload_versions } = await api("GET", serverPath("/endpoints"));
    endpointState.endpoints = endpoints;
    endpointState.eventTypes = event_types;
    endpointState.payloadVersions = payload_versions;
    const healths = await Promise.all(
      endpoints.map((e) =>
        api("GET", endpointPath(e.id, "/health")).then(
          (r) => r.health,
          // Failure policy: health is a detail of the row; the list still shows without it.
          () => null,
        ),
      ),
    );
    renderEndpoints(endpoints, healths);
  }

  function endpointHealthText(e, health) {
    if (e.disabled_at) return `Disabled: ${reasonSince(e.disabled_reason, e.disabled_at)}.`;
    if (!health) return "";
    if (health.failing_since) return `Failing since ${fmtTime(health.failing_since)} (last: ${health.last_failure_reason}).`;
    const day = health.last_24h;
    const rate = day.attempts === 0 ? "no attempts in 24 h" : `${fmtRate(day.success_rate)} of ${day.attempts} in 24 h`;
    return `${rate} \u00b7 ${health.last_success_at ? `last success ${fmtTime(health.last_success_at)}` : "no success yet"} \u00b7 ${health.pending_deliveries} pending`;
  }

  function renderEndpoints(endpoints, healths) {
    const list = $("endpoints-list");
    list.replaceChildren(
      ...endpoints.map((e, i) => {
        const small = (label, onclick, kind) => el("button", { type: "button", class: `btn btn-small${kind ? ` ${kind}` : ""}`, onclick }, label);
        return el(
          "li",
          { class: "endpoint-item", dataset: { endpointId: e.id } },
          el(
            "div",
            { class: "endpoint-url" },
            e.kind === "discord"
              ? `Discord webhook ${e.discord_webhook_id}`
              : e.url || "No URL yet: set the Callback URL above to start callbacks (until then they are held).",
          ),
          el(
            "div",
            { class: "endpoint-tags" },
            e.is_default ? badge("default") : null,
            e.disabled_at ? badge("disabled", "err") : badge("active", "ok"),
            ...e.event_types.map((t) => el("code", {}, t)),
            e.kind === "discord" ? badge("Discord") : badge(`payload v${e.payload_version}`),
            e.standard_webhooks ? badge("Standard Webhooks") : null,
            e.public_key_signatures ? badge("v1a public key") : null,
          ),
          el("div", { class: "endpoint-health" }, endpointHealthText(e, healths[i])),
          el(
            "div",
            { class: "actions" },
            e.kind === "discord" ? small("Edit message", () => openDiscordForm(e)) : small("Edit", () => editEndpoint(e)),
            e.kind === "discord" ? null : small("Reveal secret", (ev) => revealEndpointSecret(ev.target, e)),
            e.kind === "discord" ? null : small("Rotate secret", (ev) => rotateEndpointSecret(ev.target, e)),
            e.kind === "discord" ? null : small("Send test", (ev) => testEndpoint(ev.target, e)),
            // The default endpoint is re-enabled from the "Callbacks are disabled" notice above (one button for one action).
            e.disabled_at && !e.is_default ? small("Enable", (ev) => enableEndpoint(ev.target, e), "btn-primary") : null,
            e.is_default ? null : small("Delete", (ev) => deleteEndpoint(ev.target, e), "btn-danger"),
          ),
        );
      }),
    );
  }

  /** Opens the endpoint form: empty for a new endpoint, or filled with `e`'s settings. */
  function openEndpointForm(e) {
    endpointState.editing = e ? e.id : "";
    $("endpoint-form-title").textContent = e ? (e.is_default ? "Edit the default endpoint" : "Edit endpoint") : "New endpoint";
    $("endpoint-url").value = e ? e.url : "";
    const chosen = e ? e.event_types : [];
    $("endpoint-event-types").replaceChildren(
      ...endpointState.eventTypes.map((t) =>
        el(
          "label",
          { class: "checkbox" },
          el("input", { type: "checkbox", name: "endpoint-event-type", value: t, checked: chosen.includes(t) }),
          el("code", {}, t),
        ),
      ),
    );
    const version = e ? e.payload_version : 1;
    $("endpoint-payload-version").replaceChildren(
      ...endpointState.payloadVersions.map((v) => el("option", { value: String(v), selected: v === version }, PAYLOAD_VERSION_LABELS[v] ?? String(v))),
    );
    $("endpoint-standard-webhooks").checked = e ? e.standard_webhooks : false;
    $("endpoint-public-key").checked = e ? e.public_key_signatures : false;
    $("endpoint-form").hidden = false;
    $("endpoint-url").focus();
  }

  function closeEndpointForm() {
    endpointState.editing = "";
    $("endpoint-form").hidden = true;
  }

  function editEndpoint(e) {
    openEndpointForm(e);
  }

  $("add-endpoint").addEventListener("click", () => {
    hideSecret("endpoint-secret-box");
    openEndpointForm(null);
  });
  $("cancel-endpoint").addEventListener("click", closeEndpointForm);

  $("endpoint-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run(event.submitter, async () => {
      const settings = {
        url: $("endpoint-url").value,
        event_types: [...document.querySelectorAll('input[name="endpoint-event-type"]:checked')].map((box) => box.value),
        payload_version: Number($("endpoint-payload-version").value),
        standard_webhooks: $("endpoint-standard-webhooks").checked,
        public_key_signatures: $("endpoint-public-key").checked,
      };
      if (endpointState.editing) {
        await api("PUT", endpointPath(endpointState.editing), settings);
        closeEndpointForm();
        showOk("Endpoint saved.");
      } else {
        const { endpoint, secret, value } = await api("POST", serverPath("/endpoints"), settings);
        closeEndpointForm();
        showSecret("endpoint-secret-box", `Secret of ${endpoint.url}`, "Shown once: copy it now. Verify this endpoint's callbacks with it.", value, secret);
        showOk("Endpoint added.");
      }
      await loadIntegration();
    });
  });

  /** The Discord channel form (docs/discord.md): a new Discord endpoint, or `e`'s vote message. */
  const discordState = { editing: "" };
  function openDiscordForm(e) {
    discordState.editing = e ? e.id : "";
    $("discord-form-title").textContent = e ? `Discord webhook ${e.discord_webhook_id}` : "New Discord channel";
    $("discord-webhook-field").hidden = Boolean(e);
    $("discord-event-types-field").hidden = Boolean(e);
    $("discord-webhook-url").value = "";
    $("discord-event-types").replaceChildren(
      ...endpointState.eventTypes.map((t) =>
        el(
          "label",
          { class: "checkbox" },
          el("input", { type: "checkbox", name: "discord-event-type", value: t, checked: t === "heart.counted" }),
          el("code", {}, t),
        ),
      ),
    );
    $("discord-template").value = e ? (e.discord_templates["heart.counted"] ?? "") : "";
    $("discord-embed").checked = e ? e.discord_embed : false;
    $("discord-preview").textContent = "";
    $("discord-form").hidden = false;
  }
  const discordTemplates = () => ($("discord-template").value.trim() === "" ? {} : { "heart.counted": $("discord-template").value });
  $("add-discord").addEventListener("click", () => openDiscordForm(null));
  $("cancel-discord").addEventListener("click", () => {
    $("discord-form").hidden = true;
  });
  $("preview-discord").addEventListener("click", (event) => {
    run(event.target, async () => {
      const { content } = await api("POST", serverPath("/discord-preview"), {
        event_type: "heart.counted",
        template: $("discord-template").value,
        endpoint_id: discordState.editing,
      });
      $("discord-preview").textContent = content;
    });
  });
  $("discord-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run(event.submitter, async () => {
      if (discordState.editing) {
        await api("PUT", endpointPath(discordState.editing, "/discord-templates"), { templates: discordTemplates(), embed: $("discord-embed").checked });
        showOk("Discord message saved.");
      } else {
        await api("POST", serverPath("/discord-endpoints"), {
          webhook_url: $("discord-webhook-url").value,
          event_types: [...document.querySelectorAll('input[name="discord-event-type"]:checked')].map((box) => box.value),
          templates: discordTemplates(),
          embed: $("discord-embed").checked,
        });
        showOk("Discord channel added.");
      }
      $("discord-form").hidden = true;
      await loadIntegration();
    });
  });

  function revealEndpointSecret(button, e) {
    run(button, async () => {
      const { secret, value } = await api("POST", endpointPath(e.id, "/secret/reveal"));
      showSecret("endpoint-secret-box", `Secret of ${e.url}`, "Revealed on your request. Verify this endpoint's callbacks with it.", value, secret);
    });
  }

  function rotateEndpointSecret(button, e) {
    run(button, async () => {
      const { secret, value } = await api("POST", endpointPath(e.id, "/secret/rotate"), { grace_seconds: graceSeconds("callback-grace-hours") });
      showSecret(
        "endpoint-secret-box",
        `New secret of ${e.url} (rotation)`,
        "Shown once: copy it now. The previous secret also signs during the grace period (the Grace hours of the callback secret card).",
        value,
        secret,
      );
    });
  }

  function testEndpoint(button, e) {
    run(button, () =>
      sendTest("endpoint-test-result", async () => {
        const { exchange } = await api("POST", endpointPath(e.id, "/test"), { username: $("test-username").value });
        renderExchange("endpoint-test-result", exchange);
        await loadEndpoints();
      }),
    );
  }

  function enableEndpoint(button, e) {
    run(button, async () => {
      await api("POST", endpointPath(e.id, "/enable"));
      showOk("Endpoint enabled; held deliveries resume.");
      await loadIntegration();
      await loadEndpointBanner();
    });
  }

  function deleteEndpoint(button, e) {
    if (!confirm(`Delete the endpoint ${e.url}? It receives nothing more; its pending deliveries are not sent.`)) return;
    run(button, async () => {
      await api("DELETE", endpointPath(e.id));
      hideSecret("endpoint-secret-box");
      showOk("Endpoint deleted.");
      await loadEndpoints();
    });
  }

  /**
   * Inputs of the Integration tab the owner changed since they were last filled. A render leaves them as typed: a
   * settings load that answers after the owner began typing (a slow network, a tab opened twice) must not empty a
   * field or untick a box before the save. A save fills the inputs of the form it saved again (they now show what
   * was stored), and another server's render fills every input.
   */
  const editedInputs = new Set();
  for (const type of ["input", "change"])
    $("tab-integration").addEventListener(type, (event) => {
      if (event.target.id) editedInputs.add(event.target.id);
    });

  /** Sets an Integration input's `prop` (value, checked) unless the owner has changed it since it was last filled. */
  function fillInput(id, prop, value) {
    if (!editedInputs.has(id)) $(id)[prop] = value;
  }

  /** Renders the Integration tab for `server`; `savedForm`: the form whose save answered with it (its inputs are filled again). */
  function renderIntegration(server, savedForm) {
    if (integrationRendered.serverId !== server.id) editedInputs.clear();
    if (savedForm) for (const input of savedForm.querySelectorAll("[id]")) editedInputs.delete(input.id);
    integrationRendered.serverId = server.id;
    integrationRendered.count++;
    syncIntegrationFields();
    fillInput("callback-url", "value", server.callback_url);
    fillInput("standard-webhooks", "checked", server.standard_webhooks);
    fillInput("payload-version", "value", String(server.payload_version || 1));
    $("public-key-signatures").hidden = !server.public_key_signatures;
    fillInput("public-key-signatures-switch", "checked", server.public_key_signatures);
    $("callback-disabled").hidden = !server.callback_disabled_reason;
    $("callback-disabled-reason").textContent = server.callback_disabled_reason
      ? `${reasonSince(server.callback_disabled_reason, server.callback_disabled_at)}.`
      : "";
    fillInput("votifier-host", "value", server.votifier_host);
    fillInput("votifier-port", "value", server.votifier_port === null ? "" : String(server.votifier_port));
    fillInput("votifier-service-name", "value", server.votifier_service_name);
    fillInput("votifier-token", "value", "");
    $("votifier-token").placeholder = server.votifier_token_set ? "stored; empty keeps it" : "from config.yml";
    $("votifier-status").replaceChildren(server.votifier_host ? badge("on", "ok") : badge("off"));
    // Turn off is offered only while Votifier is on.
    $("votifier-off").hidden = !server.votifier_host;
    $("pull-status").replaceChildren(server.pull_enabled ? badge("on", "ok") : badge("off"));
    $("toggle-pull").textContent = server.pull_enabled ? "Turn off" : "Turn on";
    $("claims-status").replaceChildren(server.claims.claim_key_set ? badge("on", "ok") : badge("no key"));
    announceClaims(server.id, "");
    // No key yet: nothing to reveal, and the one action is to mint the first key.
    $("reveal-claim-secret").hidden = !server.claims.claim_key_set;
    $("rotate-claim-secret").textContent = server.claims.claim_key_set ? "Rotate" : "Mint a key";
    fillInput("claims-hold-days", "value", String(server.claims.hold_days));
    fillInput("claims-max-held", "value", String(server.claims.max_held_per_player));
    fillInput("claims-pays-once", "checked", server.claims.pays_once === true);
    syncNotices();
  }

  async function saveVotifier(_button, settings, message) {
    const { server } = await api("PUT", serverPath("/votifier"), settings);
    updateServer(server);
    renderIntegration(server, $("votifier-form"));
    showOk(message);
  }

  $("votifier-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run(event.submitter, () =>
      saveVotifier(
        event.submitter,
        { host: $("votifier-host").value, port: $("votifier-port").value, service_name: $("votifier-service-name").value, token: $("votifier-token").value },
        "Votifier settings saved.",
      ),
    );
  });

  $("votifier-off").addEventListener("click", (event) =>
    run(event.target, () => saveVotifier(event.target, { host: "", port: "", service_name: "", token: "" }, "Votifier turned off; pending votes are held.")),
  );

  $("send-test-vote").addEventListener("click", (event) =>
    run(event.target, () =>
      sendTest("test-vote-result", async () => {
        const { vote } = await api("POST", serverPath("/test-vote"), { username: $("test-vote-username").value });
        renderVote("test-vote-result", vote);
      }),
    ),
  );

  /**
   * The likely causes of a failed test vote, in plain words, by the raw error's kind (the raw error stays
   * in the exchange below). Empty when the vote went through or the error has no known cause.
   */
  function voteFailureHint(vote) {
    if (vote.ok || !vote.error) return "";
    const where = vote.target || "the host and port";
    const error = vote.error;
    if (/ECONNREFUSED/.test(error))
      return `Nothing accepted the connection at ${where}. Likely causes: the Minecraft server (or NuVotifier) is not running; the host or port is wrong (the port is "port:" in NuVotifier's config.yml, 8192 by default); a firewall closes the port. Once it connects, a wrong token is the next thing to check ("tokens: default:" in the same config.yml).`;
    if (/ETIMEDOUT|timed out|EHOSTUNREACH|ENETUNREACH/.test(error))
      return `No answer from ${where}. Likely causes: a firewall drops the connection, or the host or port is wrong (the port is "port:" in NuVotifier's config.yml). Check also that the server is running and that the token is "tokens: default:" from the same config.yml.`;
    if (/ENOTFOUND|EAI_AGAIN/.test(error))
      return `The host name does not resolve: check the Host field (the address players connect to, or the machine NuVotifier runs on). The port and token come from NuVotifier's config.yml.`;
    if (/refused the vote|closed the connection/.test(error))
      return `The Votifier server answered but did not take the vote. The likely cause is a wrong token: copy "tokens: default:" from NuVotifier's config.yml (or the token for this service name) and save it again.`;
    if (/not v2|did not greet|greeting/.test(error))
      return `Something answers at ${where}, but not NuVotifier with v2: check the port ("port:" in NuVotifier's config.yml) and that NuVotifier, not another service, listens there.`;
    return "";
  }

  function renderVote(containerId, vote) {
    const hint = voteFailureHint(vote);
    $(containerId).replaceChildren(
      hint ? el("p", { class: "msg msg-error vote-hint", role: "alert" }, hint) : "",
      exchangeView({
        request: {
          title: "Vote",
          line: vote.target,
          parts: [
            exchangeText("Greeting", "vote-greeting", vote.greeting || "(none)"),
            exchangeText(`Signed payload (${vote.frame_bytes} bytes sent)`, "vote-payload", vote.payload || "(not sent)"),
          ],
        },
        response: {
          title: "Answer",
          ok: vote.ok,
          latencyMs: vote.latency_ms,
          error: vote.error,
          errorClass: "vote-error",
          parts: el("pre", { class: "vote-response" }, shownBody(vote.response)),
        },
      }),
    );
  }

  $("toggle-pull").addEventListener("click", (event) =>
    run(event.target, async () => {
      const current = state.servers.find((s) => s.id === state.serverId);
      const enabled = !current?.pull_enabled;
      const { server } = await api("PUT", serverPath("/pull"), { enabled });
      updateServer(server);
      renderIntegration(server);
      showOk(enabled ? "Pull API on. Reveal the pull secret to sign requests." : "Pull API off.");
    }),
  );

  bindSecretButtons("pull", "Pull secret", {
    reveal: "Revealed on your request. Sign pull requests with it.",
    rotate: "Shown once: copy it now. The previous secret also verifies during the grace period.",
  });

  // The claim key: Reveal as for the other secrets; Mint / rotate also refreshes the card (the first key turns the ledger on).
  $("reveal-claim-secret").addEventListener("click", (event) =>
    run(event.target, async () => {
      const { secret, value } = await api("POST", serverPath("/claim-secret/reveal"));
      showSecret("claim-secret-box", "Claim key", "Revealed on your request. Put it in your reward plugin's config.", value, secret);
      announceClaims(state.serverId, value);
    }),
  );
  $("rotate-claim-secret").addEventListener("click", (event) =>
    run(event.target, async () => {
      const { secret, value } = await api("POST", serverPath("/claim-secret/rotate"), { grace_seconds: graceSeconds("claim-grace-hours") });
      showSecret(
        "claim-secret-box",
        "New claim key",
        "Shown once: copy it into your plugin's config now. The previous key stops after the grace period (0: at once).",
        value,
        secret,
      );
      const { server } = await api("GET", serverPath(""));
      updateServer(server);
      renderIntegration(server);
      announceClaims(server.id, value);
    }),
  );

  /** Tells claim-setup.js which server (and, once revealed or minted, which claim key) its paste values are for. */
  function announceClaims(serverId, claimKey) {
    document.dispatchEvent(new CustomEvent("dashboard:claims", { detail: { serverId, claimKey } }));
  }

  $("claims-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run(event.submitter, async () => {
      const { server } = await api("PUT", serverPath("/claims"), {
        hold_days: Number($("claims-hold-days").value),
        max_held_per_player: Number($("claims-max-held").value),
        pays_once: $("claims-pays-once").checked,
      });
      updateServer(server);
      renderIntegration(server, $("claims-form"));
      showOk("Claim settings saved. The hold window applies to hearts counted from now on.");
    });
  });

  $("callback-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run(event.submitter, async () => {
      const { server } = await api("PUT", serverPath("/callback"), {
        callback_url: $("callback-url").value,
        standard_webhooks: $("standard-webhooks").checked,
        payload_version: Number($("payload-version").value),
        public_key_signatures: $("public-key-signatures-switch").checked,
      });
      updateServer(server);
      renderIntegration(server, $("callback-form"));
      await loadEndpoints();
      showOk(server.callback_url ? "Callback settings saved." : "Callback removed.");
    });
  });

  $("reenable-callback").addEventListener("click", (event) =>
    run(event.target, async () => {
      const { server } = await api("POST", serverPath("/callback/enable"));
      updateServer(server);
      renderIntegration(server);
      showOk("Callbacks re-enabled; held deliveries resume.");
      await Promise.all([loadEndpointBanner(), loadEndpoints()]);
    }),
  );

  /** Reveal and Rotate of a server's newest `kind` secret (callback, pull): `#reveal-<kind>-secret`, `#rotate-<kind>-secret`. */
  function bindSecretButtons(kind, title, notes) {
    $(`reveal-${kind}-secret`).addEventListener("click", (event) =>
      run(event.target, async () => {
        const { secret, value } = await api("POST", serverPath(`/${kind}-secret/reveal`));
        showSecret(`${kind}-secret-box`, title, notes.reveal, value, secret);
      }),
    );
    $(`rotate-${kind}-secret`).addEventListener("click", (event) =>
      run(event.target, async () => {
        const { secret, value } = await api("POST", serverPath(`/${kind}-secret/rotate`), { grace_seconds: graceSeconds(`${kind}-grace-hours`) });
        showSecret(`${kind}-secret-box`, `New ${title.toLowerCase()} (rotation)`, notes.rotate, value, secret);
      }),
    );
  }

  bindSecretButtons("callback", "Callback secret", {
    reveal: "Revealed on your request. Verify callbacks with it on your backend.",
    rotate: "Shown once: copy it now. The previous secret also signs during the grace period.",
  });

  $("send-test-callback").addEventListener("click", (event) =>
    run(event.target, () =>
      sendTest("test-callback-result", async () => {
        const { exchange, delivery } = await api("POST", serverPath("/test-callback"), { username: $("test-username").value });
        renderExchange("test-callback-result", exchange);
        renderTestDelivery(delivery);
        run(null, loadEndpointBanner);
      }),
    ),
  );

  // ---- deliveries tab ------------------------------------------------------------------

  async function loadDeliveries() {
    const query = new URLSearchParams({
      status: $("delivery-status").value,
      transport: $("delivery-transport").value,
      username: $("delivery-username").value.trim(),
    });
    const [{ deliveries }] = await Promise.all([api("GET", `${serverPath("/deliveries")}?${query}`), loadEndpointHealth()]);
    const tbody = $("deliveries-table").tBodies[0];
    const filtered = query.get("status") !== "all" || query.get("transport") !== "all" || query.get("username") !== "";
    if (deliveries.length === 0)
      emptyRow(
        tbody,
        10,
        filtered
          ? "No deliveries with these filters. Set Transport and Status to All and clear Player to see every delivery."
          : "No deliveries yet. Each counted heart makes one per way you set up: set a callback URL or Votifier on the Integration tab, or send a test callback there.",
      );
    else
      tbody.replaceChildren(
        ...deliveries.map((d) => {
          const shown = deliveryState(d);
          return el(
            "tr",
            { class: d.id === state.deliveryId ? "selected" : "", dataset: { deliveryId: d.id } },
            el("td", {}, fmtWhen(d.created_at)),
            el("td", { class: "delivery-transport", title: d.endpoint_url ? `to ${d.endpoint_url}` : "" }, d.transport),
            el("td", {}, d.event_type),
            el("td", { class: "cell-name" }, d.username),
            el("td", { class: "nowrap" }, d.period),
            el("td", {}, badge(shown.label, shown.kind)),
            el("td", {}, d.attempts),
            el(
              "td",
              {},
              d.last_status_code === null ? (d.last_error ? el("span", { class: "cell-error" }, d.last_error) : "\u2013") : statusBadge(d.last_status_code),
            ),
            el("td", {}, shown.next),
            el(
              "td",
              { class: "nowrap row-actions" },
              el("button", { type: "button", class: "btn btn-small", onclick: (e) => run(e.target, () => showDelivery(d.id)) }, "Attempts"),
              d.status === "pending" ? null : el("button", { type: "button", class: "btn btn-small", onclick: (e) => redeliver(e.target, d.id) }, "Redeliver"),
            ),
          );
        }),
      );
    if (state.deliveryId) await showDelivery(state.deliveryId);
  }

  async function showDelivery(id) {
    const { delivery, attempts } = await api("GET", serverPath(`/deliveries/${encodeURIComponent(id)}`));
    state.deliveryId = id;
    for (const row of $("deliveries-table").tBodies[0].rows) row.classList.toggle("selected", row.dataset.deliveryId === id);
    $("delivery-detail").hidden = false;
    $("delivery-detail-id").textContent = delivery.id;
    $("redeliver-one").disabled = delivery.status === "pending";
    const fact = (term, value) => [el("dt", {}, term), el("dd", {}, value)];
    $("delivery-detail-facts").replaceChildren(
      ...fact("Heart id", el("code", {}, delivery.heart_id)),
      ...fact("Transport", delivery.transport),
      ...(delivery.endpoint_id ? fact("Endpoint", el("code", {}, delivery.endpoint_url || delivery.endpoint_id)) : []),
      ...fact("Status", deliveryState(delivery).label),
      ...fact("Username", delivery.username),
      ...fact("Period", delivery.period),
      ...fact("Created", fmtTime(delivery.created_at)),
      ...fact("Delivered", fmtTime(delivery.delivered_at)),
      ...fact("Failed", fmtTime(delivery.failed_at)),
      ...fact("Next attempt", deliveryState(delivery).nextTime),
    );
    const tbody = $("attempts-table").tBodies[0];
    if (attempts.length === 0) emptyRow(tbody, 7, "No attempts yet.");
    else
      tbody.replaceChildren(
        ...attempts.map((a) =>
          el(
            "tr",
            { dataset: { attempt: a.attempt } },
            el("td", {}, a.attempt),
            el("td", { class: "nowrap" }, fmtTime(a.started_at)),
            el("td", {}, statusBadge(a.status_code)),
            el("td", {}, `${a.latency_ms} ms`),
            el("td", { class: "cell-error" }, a.error || "\u2013"),
            el("td", {}, el("code", {}, a.url)),
            el("td", { class: "row-actions" }, el("button", { type: "button", class: "btn btn-small", onclick: () => showAttemptExchange(a) }, "Exchange")),
          ),
        ),
      );
    // The newest attempt's exchange is shown at once: what exactly the endpoint answered last.
    if (attempts.length > 0) showAttemptExchange(attempts[attempts.length - 1]);
    else showAttemptExchange(null);
  }

  function redeliver(button, id) {
    run(button, async () => {
      await api("POST", serverPath(`/deliveries/${encodeURIComponent(id)}/redeliver`));
      state.deliveryId = id;
      showOk("Delivery queued again; it is sent right away.");
      await loadDeliveries();
    });
  }

  $("redeliver-one").addEventListener("click", (event) => redeliver(event.target, state.deliveryId));
  $("delivery-status").addEventListener("change", () => run(null, loadDeliveries));
  $("delivery-transport").addEventListener("change", () => run(null, loadDeliveries));
  $("delivery-username").addEventListener("keydown", (event) => {
    if (event.key === "Enter") run(null, loadDeliveries);
  });
  $("refresh-deliveries").addEventListener("click", (event) => run(event.target, loadDeliveries));

  $("redeliver-failed-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run(event.submitter, async () => {
      const local = new Date($("redeliver-since").value);
      if (Number.isNaN(local.getTime())) throw new Error("pick a date and time");
      const { requeued } = await api("POST", serverPath("/deliveries/redeliver-failed"), { since: local.toISOString() });
      showOk(`${requeued} failed ${requeued === 1 ? "delivery" : "deliveries"} queued again.`);
      await loadDeliveries();
    });
  });

  // ---- attempt exchanges, endpoint health and the endpoint notice ---------------------

  /** Shows one attempt's stored exchange: the request as sent and the response as received. */
  function showAttemptExchange(attempt) {
    for (const row of $("attempts-table").tBodies[0].rows)
      row.classList.toggle("selected", attempt !== null && row.dataset.attempt === String(attempt.attempt));
    if (!attempt) {
      $("attempt-exchange-title").textContent = "";
      $("attempt-exchange-body").replaceChildren();
      return;
    }
    $("attempt-exchange-title").textContent = `Attempt ${attempt.attempt} \u00b7 ${fmtTime(attempt.started_at)}`;
    if (!attempt.request) {
      $("attempt-exchange-body").replaceChildren(el("p", { class: "muted" }, "This attempt was recorded before request and response details were stored."));
      return;
    }
    const { request, response } = attempt;
    // A transport without status codes (Votifier) has no method: no status and no response headers.
    const http = Boolean(request.method);
    $("attempt-exchange-body").replaceChildren(
      exchangeView({
        variant: "attempt-exchange",
        request: {
          title: "Request",
          line: http ? `${request.method} ${request.url}` : request.url,
          parts: [exchangeText("Headers", "exchange-headers", headerLines(request.headers)), exchangeText("Body", "exchange-body", request.body)],
        },
        response: {
          title: "Response",
          statusCode: http ? attempt.status_code : undefined,
          ok: attempt.succeeded,
          latencyMs: attempt.latency_ms,
          error: attempt.error,
          parts: [
            response && http ? exchangeText("Headers", "exchange-response-headers", headerLines(response.headers)) : null,
            response
              ? exchangeText([http ? "Body " : "Answer ", el("span", { class: "muted" }, "(first 4 KiB)")], "exchange-response-body", shownBody(response.body))
              : el("p", { class: "muted" }, "No response was received."),
            response?.body_truncated ? el("p", { class: "exchange-truncated" }, "The response was longer; only its first 4 KiB are kept.") : null,
          ],
        },
      }),
    );
  }

  /** After "Send test callback": where the stored test delivery stands, with a link to it. */
  function renderTestDelivery(delivery) {
    const box = $("test-callback-delivery");
    if (!delivery) {
      box.hidden = true;
      return;
    }
    const note = delivery.status === "pending" ? ` \u00b7 retried at ${fmtTime(delivery.next_attempt_at)}` : "";
    box.replaceChildren(
      el("span", {}, "Stored as delivery ", el("code", {}, delivery.id), " "),
      deliveryBadge(delivery.status),
      el("span", { class: "muted" }, note),
      el("button", { type: "button", class: "btn btn-small", id: "open-test-delivery", onclick: () => openDelivery(delivery.id) }, "Open in delivery log"),
    );
    box.hidden = false;
  }

  const pct = (w) => (w.attempts === 0 ? "\u2013" : fmtRate(w.success_rate));

  async function loadEndpointHealth() {
    const { health } = await api("GET", serverPath("/endpoint-health"));
    const stat = (label, value, id) => el("div", { class: "stat", id }, el("div", { class: "stat-value" }, value), el("div", { class: "stat-label" }, label));
    $("endpoint-health-url").textContent = health.callback_url || "No callback URL configured.";
    $("endpoint-health-state").replaceChildren(
      health.disabled_at
        ? badge("disabled", "err")
        : health.failing_since
          ? badge("failing", "warn")
          : health.last_success_at
            ? badge("healthy", "ok")
            : badge("no attempts yet"),
    );
    $("endpoint-health-stats").replaceChildren(
      stat(`Success, last 24 h (${health.last_24h.succeeded} of ${health.last_24h.attempts})`, pct(health.last_24h), "health-rate-24h"),
      stat(`Success, last 7 days (${health.last_7d.succeeded} of ${health.last_7d.attempts})`, pct(health.last_7d), "health-rate-7d"),
      stat("Failed for good, last 7 days", String(health.failed_deliveries_7d), "health-failed-7d"),
      stat("Waiting to be sent", String(health.pending_deliveries), "health-pending"),
    );
    const fact = (term, value, id) => [el("dt", {}, term), el("dd", { id }, value)];
    $("endpoint-health-facts").replaceChildren(
      ...fact("Last success", fmtTime(health.last_success_at), "health-last-success"),
      ...fact("Last failure", fmtTime(health.last_failure_at), "health-last-failure"),
      ...fact("Last failure reason", health.last_failure_reason || "\u2013", "health-last-failure-reason"),
      ...fact("Failing since", fmtTime(health.failing_since), "health-failing-since"),
      ...fact("Disabled", health.disabled_at ? reasonSince(health.disabled_reason, health.disabled_at) : "\u2013", "health-disabled"),
      ...fact("Auto-disable at", fmtTime(health.auto_disable_at), "health-auto-disable-at"),
    );
    showEndpointBanner(health);
  }

  async function loadEndpointBanner() {
    if (!state.serverId) return;
    const { health } = await api("GET", serverPath("/endpoint-health"));
    showEndpointBanner(health);
  }

  /** The notice on every tab: callback disabled, endpoint failing, or deliveries lost for good. */
  function showEndpointBanner(health) {
    const banner = $("endpoint-banner");
    const failed = health.failed_deliveries_7d;
    const lost = failed > 0 ? ` ${failed} ${failed === 1 ? "delivery" : "deliveries"} failed for good in the last 7 days.` : "";
    let title = "";
    let detail = "";
    const held = `${health.pending_deliveries} waiting ${health.pending_deliveries === 1 ? "delivery is" : "deliveries are"} held until you re-enable.${lost}`;
    if (health.disabled_at) {
      title = "Callbacks are disabled.";
      detail = `${reasonSince(health.disabled_reason, health.disabled_at)}. ${held}`;
    } else if (health.failing_since) {
      title = "Your endpoint is failing.";
      detail = `Every attempt since ${fmtTime(health.failing_since)} failed (last: ${health.last_failure_reason}). Unless it answers 2xx, callbacks are disabled automatically at ${fmtTime(health.auto_disable_at)}.${lost}`;
    } else if (failed > 0) {
      title = "Deliveries failed.";
      detail = lost.trim();
    }
    banner.dataset.empty = String(title === "");
    banner.dataset.disabled = String(Boolean(health.disabled_at));
    banner.classList.toggle("banner-warn", !health.disabled_at);
    $("endpoint-banner-title").textContent = title;
    $("endpoint-banner-detail").textContent = detail;
    $("endpoint-banner-reenable").hidden = !health.disabled_at;
    $("callback-disabled-held").textContent = health.disabled_at ? held : "";
    syncNotices();
  }

  /**
   * One "Callbacks are disabled" notice at a time: the Integration tab has its own (beside the callback
   * settings, with its Re-enable), so there the notice on every tab stands down while the callback is disabled.
   */
  function syncNotices() {
    const banner = $("endpoint-banner");
    const integrationSaysIt = state.tab === "integration" && !$("callback-disabled").hidden;
    banner.hidden = banner.dataset.empty !== "false" || (integrationSaysIt && banner.dataset.disabled === "true");
  }

  $("endpoint-banner-deliveries").addEventListener("click", () => {
    $("delivery-status").value = "all";
    if (location.hash === "#deliveries") selectTab("deliveries");
    else location.hash = "#deliveries";
  });
  $("endpoint-banner-reenable").addEventListener("click", (event) =>
    run(event.target, async () => {
      const { server } = await api("POST", serverPath("/callback/enable"));
      updateServer(server);
      if (state.tab === "integration") renderIntegration(server);
      showOk("Callbacks re-enabled; held deliveries resume.");
      await loadEndpointBanner();
    }),
  );

  // ---- hearts tab ----------------------------------------------------------------------

  async function loadRanking() {
    const { period, entries } = await api("GET", "/hearts/ranking");
    $("ranking-period").textContent = `(${period})`;
    const tbody = $("ranking-table").tBodies[0];
    if (entries.length === 0) return emptyRow(tbody, 3, "No counted hearts this month yet.");
    tbody.replaceChildren(
      ...entries.map((e) =>
        el(
          "tr",
          { class: e.server_id === state.serverId ? "selected" : "" },
          el("td", {}, e.rank),
          el(
            "td",
            {},
            e.server_name ? el("span", {}, el("strong", {}, e.server_name), " ", el("code", { class: "muted" }, e.server_id)) : el("code", {}, e.server_id),
          ),
          el("td", {}, e.hearts),
        ),
      ),
    );
  }
  $("refresh-ranking").addEventListener("click", (event) => run(event.target, loadRanking));

  // ---- alerts tab ----------------------------------------------------------------------

  let alertsUnreadOnly = false;
  let shownAlertIds = [];

  async function loadAlerts() {
    const [{ alerts }, channels] = await Promise.all([api("GET", `/alerts${alertsUnreadOnly ? "?unread=true" : ""}`), api("GET", "/alert-channels")]);
    shownAlertIds = alerts.filter((a) => !a.read).map((a) => a.id);
    $("alerts-unread").textContent = shownAlertIds.length > 0 ? `(${shownAlertIds.length})` : "";
    const tbody = $("alerts-table").tBodies[0];
    if (alerts.length === 0) emptyRow(tbody, 3, alertsUnreadOnly ? "No unread alerts." : "No alerts yet.");
    else
      tbody.replaceChildren(
        ...alerts.map((a) =>
          el(
            "tr",
            { class: a.read ? "" : "unread" },
            el("td", {}, fmtTime(a.created_at)),
            el(
              "td",
              {},
              a.read ? a.title : el("strong", {}, a.title),
              el("br"),
              el("span", { class: "muted" }, a.detail),
              a.resolved ? el("span", { class: "muted" }, " (resolved)") : "",
            ),
            el("td", {}, el("a", { href: a.link }, "Open")),
          ),
        ),
      );
    $("alert-email").value = channels.email;
    $("alert-discord").value = "";
    $("alert-discord-remove").checked = false;
    $("alert-discord-state").textContent = channels.discord_webhook_set
      ? `(set: webhook ${channels.discord_webhook_id}; paste a new one to replace it)`
      : "(not set)";
  }
  $("refresh-alerts").addEventListener("click", (event) => run(event.target, loadAlerts));
  $("alerts-unread-only").addEventListener("click", (event) => {
    alertsUnreadOnly = !alertsUnreadOnly;
    event.target.setAttribute("aria-pressed", String(alertsUnreadOnly));
    run(event.target, loadAlerts);
  });
  $("alerts-mark-read").addEventListener("click", (event) =>
    run(event.target, async () => {
      if (shownAlertIds.length > 0) await api("POST", "/alerts/read", { ids: shownAlertIds });
      await loadAlerts();
    }),
  );
  $("alert-channels-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run($("alert-channels-save"), async () => {
      await api("PUT", "/alert-channels", {
        email: $("alert-email").value,
        discord_webhook_url: $("alert-discord").value,
        remove_discord_webhook: $("alert-discord-remove").checked,
      });
      // The pasted URL is cleared at once: it is never shown again.
      $("alert-discord").value = "";
      await loadAlerts();
      showOk("Alert channels saved.");
    });
  });

  $("flash-close").addEventListener("click", () => ($("flash").hidden = true));

  /**
   * Opens one delivery's attempts on the deliveries tab (the hearts list and the test callback's
   * link): the status and player filters are cleared so the delivery is in the list too.
   */
  function openDelivery(id) {
    state.deliveryId = id;
    $("delivery-status").value = "all";
    $("delivery-username").value = "";
    if (location.hash === "#deliveries") selectTab("deliveries");
    else location.hash = "#deliveries";
  }

  // The helpers the page's ES modules share (insights.js, signature-debugger.js).
  window.dashboard = Object.freeze({
    api,
    run,
    el,
    fmtTime,
    fmtRate,
    badge,
    deliveryBadge,
    deliveryState,
    statusBadge,
    emptyRow,
    serverPath,
    showOk,
    showError,
    openDelivery,
  });

  // ---- start ---------------------------------------------------------------------------

  if (state.token) {
    signIn(state.token).catch((error) =>
      signOut(error.status === 401 ? `Your token was rejected (${error.message}). Sign in again.` : `Cannot sign in: ${error.message}`),
    );
  } else {
    // An owner who came through a login link has a session cookie: try it before asking for a token.
    // Failure policy: no (live) session is the ordinary case for operators: show the sign-in screen.
    signIn("").catch(() => showLogin(""));
  }
})();
