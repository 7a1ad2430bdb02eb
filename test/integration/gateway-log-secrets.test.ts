/**
 * No secret or token that travels in a URL (or a body, or a header) reaches the gateway's log, whatever
 * the method or the status: every public route of the gateway (the route table in gateway/server.ts, the
 * probes, the dashboard mounted as in gateway/public-gateway.ts, and an unknown path) is requested with
 * every method, and the whole captured log output (the request lines, the dashboard's lines, errors) is
 * searched for each secret value used.
 */
import { randomBytes } from "node:crypto";
import test from "ava";
import { PULL_CLAIMS_PATH, PULL_EVENT_CLAIMS_PATH, PULL_EVENTS_PATH, PULL_HEARTS_PATH } from "../../gateway/handle-pull.js";
import { REFERRAL_LINK_PREFIX } from "../../gateway/handle-referral-link.js";
import { JWKS_PATH, WEBHOOK_KEYS_PATH } from "../../gateway/handle-well-known.js";
import { VOTES_JSON_PATH, VOTES_PATH } from "../../gateway/handle-vote-claim.js";
import { DOCS_PREFIX, LANDING_PATH } from "../../gateway/landing.js";
import { OPENAPI_PATH } from "../../gateway/openapi.js";
import { DASHBOARD_API_PREFIX, DASHBOARD_PATH } from "../../gateway/dashboard/routes.js";
import { INGEST_PATH } from "../../services/shared/values/contract.js";
import { createOpsHandler } from "../../services/shared/runtime/health.js";
import { formatIngestSignature } from "../../services/shared/values/signature.js";
import { DASHBOARD_LOGIN_PATH, RECEIPT_JSON_SUFFIX, RECEIPT_PATH_PREFIX } from "../../services/shared/values/wire.js";
import { startStack, type TestStack } from "../../scripts/harness/stack.js";
import { captureLog, nowSeconds, type CapturedLog } from "./gateway-stack.js";

const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
const DASHBOARD_TOKEN = `dash-${randomBytes(24).toString("base64url")}`;

let stack: TestStack;
let gatewayLog: CapturedLog;
let gatewayUrl: string;
test.before(async () => {
  // Links (receipts, login) name this base; the test opens their paths on the gateway it started.
  stack = await startStack({ gateway: false, publicBaseUrl: "https://list.example" });
  gatewayLog = captureLog("debug");
  // As gateway/public-gateway.ts builds it: the probes on the public port and the dashboard, logging to the gateway's logger.
  const gateway = await stack.startGateway({
    log: gatewayLog.log,
    dashboard: { token: DASHBOARD_TOKEN, log: gatewayLog.log },
    overrides: () => ({ ops: createOpsHandler({ checks: [] }), dashboard: true }),
  });
  gatewayUrl = gateway.url;
});
test.after.always(async () => {
  await stack?.close();
});

/** One request to make with every method: its URL and, for the methods that carry one, its body and headers. */
interface Target {
  path: string;
  body?: string;
  headers?: Record<string, string>;
}

const signedBy = (secret: string, payload: object): Pick<Target, "body" | "headers"> => {
  const body = JSON.stringify(payload);
  return { body, headers: { "content-type": "application/json", "x-service-signature": formatIngestSignature(secret, nowSeconds(), body) } };
};

test("every public route with every method: no receipt token, claim key, login token, referral token, secret or session reaches a log line", async (t) => {
  const { admin, hearts, referral, access } = stack.clients;
  const { server } = await admin.createServer({ name: "Log Secrets", registrationUrl: "https://game.example/register" });
  const serverId = server!.id;
  await admin.setReferralsEnabled({ serverId, enabled: true });
  const referralSecret = (await admin.createReferralSecret({ serverId })).secret;
  await admin.setPullEnabled({ serverId, enabled: true });
  const pullSecret = (await admin.revealPullSecret({ serverId })).secret;
  const { claimKey } = await admin.rotateClaimKey({ serverId });
  const steamId = "76561198000004242";
  const cast = await hearts.castHeart({
    serverId,
    voterIdentity: "log-voter",
    username: "Steve",
    ip: "203.0.113.42",
    userAgent: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
    steamId,
  });
  const receiptToken = cast.receiptUrl.split("/").pop() ?? "";
  const clickToken = (await referral.recordClick({ serverId, referrerIdentity: "log-referrer" })).token;
  await access.createOwner({ ownerId: "log-owner", displayName: "Log Owner" });
  await access.assignServer({ serverId, ownerId: "log-owner" });
  const loginLink = new URL((await access.createDashboardLoginLink({ ownerId: "log-owner" })).url);
  const loginToken = loginLink.searchParams.get("token") ?? "";

  // The referral link answers with the referral (ref_) token in its redirect.
  const link = await fetch(`${gatewayUrl}${REFERRAL_LINK_PREFIX}${serverId}?referrer=log-referrer`, { redirect: "manual" });
  const refToken = new URL(link.headers.get("location") ?? "http://x/").searchParams.get("ref_token") ?? "";
  // The login link opened once: the session cookie it sets is a secret too.
  const opened = await fetch(`${gatewayUrl}${loginLink.pathname}${loginLink.search}`, { redirect: "manual" });
  const sessionToken = /dashboard_session=([^;]*)/.exec(opened.headers.get("set-cookie") ?? "")?.[1] ?? "";
  const secrets = { receiptToken, claimKey, loginToken, refToken, clickToken, referralSecret, pullSecret, DASHBOARD_TOKEN, sessionToken };
  for (const [name, value] of Object.entries(secrets)) t.true(value.length >= 16, `${name} was made`);

  const { links } = (await (await fetch(`${gatewayUrl}${LANDING_PATH}`)).json()) as { links: { docs: Record<string, string> } };
  const ingestBody = { event: "registered", token: clickToken, server_id: serverId, referee_identity: "log-referee", server_event_id: "log-reg-1" };
  const targets: Target[] = [
    { path: LANDING_PATH },
    { path: Object.values(links.docs)[0] ?? `${DOCS_PREFIX}callbacks` },
    { path: OPENAPI_PATH },
    { path: WEBHOOK_KEYS_PATH },
    { path: JWKS_PATH },
    { path: INGEST_PATH, ...signedBy(referralSecret, ingestBody) },
    { path: PULL_HEARTS_PATH, ...signedBy(pullSecret, { server_id: serverId }) },
    { path: PULL_CLAIMS_PATH, ...signedBy(pullSecret, { server_id: serverId, heart_ids: [cast.heartId] }) },
    { path: PULL_EVENTS_PATH, ...signedBy(pullSecret, { server_id: serverId }) },
    { path: PULL_EVENT_CLAIMS_PATH, ...signedBy(pullSecret, { server_id: serverId, event_ids: [cast.heartId] }) },
    { path: `${VOTES_PATH}?action=status&key=${claimKey}&steamid=${steamId}` },
    { path: `${VOTES_PATH}?object=votes&element=claim&key=${claimKey}&steamid=${steamId}` },
    { path: `${VOTES_PATH}?format=json&key=${claimKey}&steamid=${steamId}` },
    { path: `${VOTES_JSON_PATH}?key=${claimKey}&steamid=${steamId}` },
    { path: `${VOTES_PATH}?action=claim&key=${claimKey}&steamid=${steamId}` },
    { path: `${REFERRAL_LINK_PREFIX}${serverId}?referrer=log-referrer&ref_token=${refToken}` },
    { path: `${RECEIPT_PATH_PREFIX}${receiptToken}` },
    { path: `${RECEIPT_PATH_PREFIX}${receiptToken}${RECEIPT_JSON_SUFFIX}` },
    { path: "/healthz" },
    { path: "/readyz" },
    { path: DASHBOARD_PATH },
    { path: `${DASHBOARD_API_PREFIX}/session`, headers: { cookie: `dashboard_session=${sessionToken}` } },
    { path: `${DASHBOARD_API_PREFIX}/servers`, headers: { authorization: `Bearer ${DASHBOARD_TOKEN}` } },
    { path: `${DASHBOARD_LOGIN_PATH}?token=${loginToken}` },
    { path: `/no/such/path?key=${claimKey}&token=${loginToken}` },
  ];
  const statuses = new Set<string>();
  for (const target of targets) {
    for (const method of METHODS) {
      const carriesBody = method !== "GET" && method !== "HEAD";
      const res = await fetch(`${gatewayUrl}${target.path}`, {
        method,
        redirect: "manual",
        headers: target.headers ?? {},
        ...(carriesBody && target.body !== undefined ? { body: target.body } : {}),
      });
      await res.arrayBuffer();
      statuses.add(`${method} ${res.status}`);
    }
  }
  t.log(`answers seen: ${[...statuses].sort().join(", ")}`);
  const requestLines = gatewayLog.lines.filter((line) => line.msg === "request" || line.msg === "request aborted by the client");
  t.true(requestLines.length >= targets.length * METHODS.length, "every request was logged");
  for (const status of [200, 302, 303, 404, 405])
    t.true(
      requestLines.some((l) => l.status === status),
      `a ${status} was logged`,
    );

  const everything = gatewayLog.raw.join("\n");
  for (const [name, value] of Object.entries(secrets)) {
    const leaks = gatewayLog.raw.filter((line) => line.includes(value)).map((line) => line.replaceAll(value, `<${name}>`));
    t.false(everything.includes(value), `${name} reached the log: ${leaks.slice(0, 3).join("\n")}`);
  }
});
