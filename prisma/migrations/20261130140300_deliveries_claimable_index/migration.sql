-- The dispatcher's claim (services/delivery/claim-deliveries.ts) reads pending rows in next_attempt_at order. Pull
-- deliveries are pending until the owner claims them and a dispatcher never sends them, yet the index held them: a
-- server whose owner claims rarely put thousands of rows, due long ago, before every claim's first sendable one, read
-- and filtered out on every poll. This partial index holds the pending rows a dispatcher may send (not pull), and
-- replaces the one that held every pending row (the claim was its only reader).
CREATE INDEX "deliveries_pending_pushed_next_attempt_at_idx" ON "deliveries"("next_attempt_at") WHERE "status" = 'pending' AND "transport" <> 'pull';
DROP INDEX "deliveries_pending_next_attempt_at_idx";

