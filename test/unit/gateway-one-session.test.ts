/**
 * The gateway keeps ONE HTTP/2 session to the referral service: its own routes (a referral link here)
 * and the dashboard (an operator's API call) share the transport createPublicGateway builds, so a
 * stub referral service sees one session however many calls the gateway makes.
 */
import test from "ava";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { createPublicGateway } from "../../gateway/public-gateway.js";
import { createLogger } from "../../services/shared/runtime/log.js";
import { createMetrics } from "../../services/shared/runtime/metrics.js";

const DASHBOARD_TOKEN = "one-session-test-dashboard-token-0123456789";

test("the gateway's routes and its dashboard call the referral service over one HTTP/2 session", async (t) => {
  // A referral service with no routes: every call is answered (unimplemented), which is all this test needs.
  const stub = http2.createServer(connectNodeAdapter({ routes: () => {} }));
  const sessions = new Set<http2.ServerHttp2Session>();
  stub.on("session", (s) => sessions.add(s));
  await new Promise<void>((r) => stub.listen(0, "127.0.0.1", r));
  const gateway = createPublicGateway({
    referralServiceUrl: `http://127.0.0.1:${(stub.address() as AddressInfo).port}`,
    serviceToken: "one-session-test-service-token",
    dashboardToken: DASHBOARD_TOKEN,
    publicBaseUrl: "http://127.0.0.1",
    log: createLogger("one-session-test", "silent"),
    metrics: createMetrics("one_session_test"),
    now: () => new Date(),
    checks: [],
    isDraining: () => false,
  });
  await new Promise<void>((r) => gateway.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
  try {
    const link = await fetch(`${base}/r/5b0c3a52-6f1e-4c3b-9a51-2d0f0b6f6c11?referrer=alice`, { redirect: "manual" });
    const api = await fetch(`${base}/dashboard/api/servers`, { headers: { authorization: `Bearer ${DASHBOARD_TOKEN}` } });
    await Promise.all([link.arrayBuffer(), api.arrayBuffer()]);
    // Both reached the stub (an unimplemented RPC is the gateway's 500 / the dashboard's error answer, not a 404 route miss).
    t.is(link.status, 500);
    t.true(api.status >= 500, `dashboard answered ${api.status}`);
    t.is(sessions.size, 1, "one HTTP/2 session for every call of the gateway");
  } finally {
    gateway.closeAllConnections();
    gateway.close();
    for (const s of sessions) s.destroy();
    stub.close();
  }
});
