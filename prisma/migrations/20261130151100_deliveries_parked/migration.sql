-- A held delivery (pending and due, but not sendable now: a callback endpoint without a URL, disabled by a 410 or
-- deleted, or without an active secret; a Votifier delivery of a server without Votifier) stayed in the claim's
-- partial index for ever, so every poll of every dispatcher read all of them before its first sendable row (a server
-- that never set a callback URL holds one per counted heart). `parked_at` takes such a row out of the claim's index:
-- the dispatcher parks the held rows its poll reads (services/delivery/pipeline/park-held.ts), and the write that
-- makes them sendable clears it in its own transaction. The claim's index gets `parked_at IS NULL` (replacing the one
-- of 20261130140300_deliveries_claimable_index); the release finds a server's parked rows by its own partial index.
ALTER TABLE "deliveries" ADD COLUMN "parked_at" TIMESTAMPTZ(3);
CREATE INDEX "deliveries_claimable_next_attempt_at_idx" ON "deliveries"("next_attempt_at")
  WHERE "status" = 'pending' AND "transport" <> 'pull' AND "parked_at" IS NULL;
CREATE INDEX "deliveries_parked_server_id_endpoint_id_idx" ON "deliveries"("server_id", "endpoint_id")
  WHERE "status" = 'pending' AND "parked_at" IS NOT NULL;
DROP INDEX "deliveries_pending_pushed_next_attempt_at_idx";
