-- The pull lists (services/delivery/pull-store.ts) read one kind each: the server's pending counted hearts, or its
-- pending referral events. One partial index held both, so a server with thousands of unclaimed referral events read
-- them all to list its hearts (and the other way round). One partial index per kind, replacing the shared one.
CREATE INDEX "deliveries_pull_pending_hearts_idx" ON "deliveries"("server_id", "created_at", "id")
  WHERE "transport" = 'pull' AND "status" = 'pending' AND "event_type" = 'heart.counted';
CREATE INDEX "deliveries_pull_pending_events_idx" ON "deliveries"("server_id", "created_at", "id")
  WHERE "transport" = 'pull' AND "status" = 'pending' AND "event_type" <> 'heart.counted';
DROP INDEX "deliveries_pull_pending_server_id_created_at_id_idx";
