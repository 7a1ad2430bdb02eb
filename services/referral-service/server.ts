import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { CoreDeps } from "../shared/deps.js";
import { createServerInterceptor } from "../shared/interceptors.js";
import type { Metrics } from "../shared/metrics.js";
import { referralRoutes } from "../referral/routes.js";
import { serverAdminRoutes } from "../servers/routes.js";
import { heartRoutes } from "../hearts/routes.js";
import { deliveryRoutes, type DeliveryRouteDeps } from "../delivery/routes.js";
import { operatorRoutes } from "../operator/routes.js";
import type { FraudRules } from "../hearts/domain/fraud-rules.js";

/** Everything the referral service's RPCs need. */
export interface ReferralServiceDeps extends CoreDeps, DeliveryRouteDeps {
  metrics: Metrics;
  /** Fraud scoring rules for hearts; the documented defaults when omitted. */
  fraudRules?: FraudRules;
}

/** The Connect routes of every internal service this process hosts. */
export function createRoutes(deps: ReferralServiceDeps): (router: ConnectRouter) => void {
  return (router) => {
    referralRoutes(deps)(router);
    serverAdminRoutes(deps)(router);
    heartRoutes(deps)(router);
    deliveryRoutes(deps)(router);
    operatorRoutes(deps)(router);
  };
}

/**
 * Builds the referral service's HTTP/2 (cleartext) server, unstarted. One port
 * serves the Connect, gRPC and gRPC-Web protocols.
 */
export function createReferralServiceServer(deps: ReferralServiceDeps): {
  server: http2.Http2Server;
  listen(port: number, host?: string): Promise<number>;
  close(): Promise<void>;
} {
  const handler = connectNodeAdapter({
    routes: createRoutes(deps),
    interceptors: [createServerInterceptor(deps.log, deps.metrics)],
    // Connect, gRPC and gRPC-Web are all enabled by default on the same port.
  });
  const server = http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  return {
    server,
    listen: (port, host = "127.0.0.1") =>
      new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
      }),
    close: () =>
      new Promise((resolve) => {
        // Graceful: stop accepting; GOAWAY lets in-flight streams finish before sessions close.
        for (const session of sessions) session.close();
        server.close(() => resolve());
      }),
  };
}
