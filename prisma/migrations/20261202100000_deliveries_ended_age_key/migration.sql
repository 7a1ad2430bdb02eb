-- Deliveries and their attempts were kept for ever (about 1 KB per counted heart). Retention now removes a delivery
-- that ended (delivered, failed or withdrawn) more than RETENTION_DELIVERY_DAYS ago, with its attempts (the foreign
-- key's ON DELETE CASCADE), in batches read through this index: partial to ended rows, so the 20,000 pending rows of
-- a busy server are never in it, and keyed by the end time in UTC (ageKeySql, services/shared/adapters/retention-rule.ts),
-- an expression no hot path writes, so the claim, the pull pages and the dashboard's lists can never pick it.
-- The end time: delivered_at, else failed_at, else (a withdrawn delivery, which records no resolution time) created_at,
-- the time the heart's Kafka message was consumed; the Kafka replay guard counts from that time too.
-- Its columns (status, delivered_at, failed_at, created_at) are not written by the lease updates, which stay HOT.
CREATE INDEX "deliveries_ended_age_key_idx" ON "deliveries"((COALESCE("delivered_at", "failed_at", "created_at") AT TIME ZONE 'UTC'))
  WHERE "status" <> 'pending'::"DeliveryStatus";
