-- The claim (services/delivery/claim-deliveries.ts) reads pending rows in next_attempt_at order:
-- a partial index holds only those. The full (status, next_attempt_at) index took an entry on
-- every delivery's insert and another on its result update (a status change is never a HOT update).
CREATE INDEX "deliveries_pending_next_attempt_at_idx" ON "deliveries"("next_attempt_at") WHERE "status" = 'pending';
DROP INDEX "deliveries_status_next_attempt_at_idx";

-- The pull page (services/delivery/pull-store.ts) reads a server's pending pull rows in (created_at,
-- id) order: a partial index holds only those, so callback and Votifier rows never write into it.
-- The server's delivery list filtered by transport uses (server_id, status, created_at) instead.
CREATE INDEX "deliveries_pull_pending_server_id_created_at_id_idx" ON "deliveries"("server_id", "created_at", "id") WHERE "transport" = 'pull' AND "status" = 'pending';
DROP INDEX "deliveries_server_id_transport_status_created_at_id_idx";
