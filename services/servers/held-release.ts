import type { Tx } from "../shared/adapters/db.js";

/**
 * Which held deliveries a settings write may have made sendable: an endpoint's callback deliveries (a URL set, a
 * re-enable, a callback secret minted), or a server's Votifier deliveries (Votifier set up).
 */
export type HeldScope = { serverId: string; endpointId: string } | { serverId: string; transport: "votifier" };

/**
 * What the settings writes need to give held deliveries back to the dispatcher: the deliveries table's unpark
 * (services/delivery/pipeline/write-deliveries.ts unparkDeliveries), passed in by the process that hosts both, as the
 * servers code does not import the delivery code. Called inside the write's transaction, after its server row lock.
 */
export interface HeldReleaseDeps {
  releaseHeld: (tx: Tx, scope: HeldScope) => Promise<number>;
}
