import type { DescService } from "@bufbuild/protobuf";
import { createRoutes } from "../../services/referral-service/server.js";

/**
 * Every service the referral service hosts, found by registering its routes on a
 * recording router: a service added to createRoutes is covered by the access tests
 * without editing them.
 */
export function hostedServices(): DescService[] {
  const services: DescService[] = [];
  const router = { service: (s: DescService) => void services.push(s), rpc: () => undefined };
  createRoutes({} as never)(router as never);
  return services;
}
