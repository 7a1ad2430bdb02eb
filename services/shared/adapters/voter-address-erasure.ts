import { Prisma } from "../../../gen/prisma/client.js";

/**
 * "This row still holds a voter's address" (issue 30): the predicate of the partial indexes hearts_address_held_idx and
 * referral_clicks_address_held_idx (migration 20261201200000_voter_address_erasure), written exactly so, so that the
 * planner reads those indexes. The address erasure rules of hearts and clicks (heartAddressesRetention in
 * services/hearts/store.ts, clickAddressesRetention in services/referral/record-click.ts) find their rows with it; an
 * erased row (ip, subnet and user_agent all NULL) leaves the index.
 */
export const ADDRESS_HELD = Prisma.sql`(ip IS NOT NULL OR subnet IS NOT NULL OR user_agent IS NOT NULL)`;
