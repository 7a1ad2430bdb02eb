-- The dispatcher's claim read through a saturated server's due rows: the servers with no room left were a filter on
-- the claimable index (next_attempt_at), so one slow receiver with a large backlog ahead in the due order cost every
-- poll its whole backlog. The claim now scans a bounded number of the oldest due rows whatever their server, and when
-- that scan was full of saturated servers' rows it claims past them server by server
-- (services/delivery/pipeline/claim-deliveries.ts, claimPastSaturatedSql): a walk over the servers with claimable
-- rows, one index entry per server, and each server's oldest due rows. This index serves both: the same predicate as
-- the claimable index, keyed by server.
CREATE INDEX "deliveries_claimable_server_id_next_attempt_at_idx" ON "deliveries"("server_id", "next_attempt_at")
  WHERE "status" = 'pending' AND "transport" <> 'pull' AND "parked_at" IS NULL;
