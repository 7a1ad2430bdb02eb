/**
 * Owners' dashboard sessions in tests: mint a login link through the AccessService
 * (as the list's backend does), open it like a browser, and call the dashboard API
 * with the session cookie and the CSRF token.
 */
import type { AddressInfo } from "node:net";
import type { Client } from "@connectrpc/connect";
import type { AccessService } from "../../gen/proto/access/v1/access_pb.js";
import { createDashboardRoutes } from "../../gateway/dashboard/routes.js";
import { createReferralServiceClients } from "../../gateway/clients.js";
import { createGatewayServer } from "../../gateway/server.js";
import type { Logger } from "../../services/shared/runtime/log.js";
import { createMetrics } from "../../services/shared/runtime/metrics.js";
import { createServiceTransport } from "../../services/shared/rpc/service-transport.js";

/** A signed-in owner: the cookie header to send and the session's CSRF token. */
export interface OwnerSession {
  cookie: string;
  csrf: string;
  sessionToken: string;
}

/** Opens a login URL (on `gatewayUrl`) like a browser: 303 + Set-Cookie; then reads the CSRF token. */
export async function openLoginLink(gatewayUrl: string, loginUrl: string): Promise<OwnerSession> {
  const link = new URL(loginUrl);
  const res = await fetch(`${gatewayUrl}${link.pathname}${link.search}`, { redirect: "manual" });
  if (res.status !== 303) throw new Error(`login link answered ${res.status}: ${await res.text()}`);
  const setCookie = res.headers.get("set-cookie") ?? "";
  const sessionToken = /dashboard_session=([^;]*)/.exec(setCookie)?.[1] ?? "";
  const cookie = `dashboard_session=${sessionToken}`;
  const session = (await (await fetch(`${gatewayUrl}/dashboard/api/session`, { headers: { cookie } })).json()) as { csrf_token: string };
  return { cookie, csrf: session.csrf_token, sessionToken };
}

/** Creates an owner (when new) and signs them in through a fresh login link. */
export async function signInOwner(access: Client<typeof AccessService>, gatewayUrl: string, ownerId: string): Promise<OwnerSession> {
  await access.createOwner({ ownerId, displayName: `Owner ${ownerId}` }).catch(() => undefined);
  const { url } = await access.createDashboardLoginLink({ ownerId });
  return openLoginLink(gatewayUrl, url);
}

/** Calls the dashboard API as a signed-in owner (cookie, and the CSRF token on every call). */
export async function ownerApi(gatewayUrl: string, session: OwnerSession, method: string, path: string, body?: unknown) {
  const res = await fetch(`${gatewayUrl}/dashboard/api${path}`, {
    method,
    headers: { cookie: session.cookie, "x-csrf-token": session.csrf, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** A gateway with the dashboard mounted, in front of `rpcUrl`, authenticated with `token`. */
export async function startDashboardGateway(opts: {
  rpcUrl: string;
  token: string;
  operatorToken?: string;
  secureCookies?: boolean;
  log: Logger;
  now?: () => Date;
}) {
  const now = opts.now ?? (() => new Date());
  const server = createGatewayServer({
    ...createReferralServiceClients(opts.rpcUrl, opts.token),
    log: opts.log,
    metrics: createMetrics("gateway"),
    now,
    extraRoutes: createDashboardRoutes({
      transport: createServiceTransport(opts.rpcUrl, opts.token),
      token: opts.operatorToken,
      secureCookies: opts.secureCookies ?? false,
      log: opts.log,
      now,
    }),
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
export type DashboardGateway = Awaited<ReturnType<typeof startDashboardGateway>>;
