-- The Discord transport batches: sending one message for an endpoint, it leases that endpoint's other due Discord
-- deliveries (services/delivery/pipeline/discord-transport.ts). This partial index holds only pending, unparked Discord
-- rows, by endpoint and due time, so that lease reads the rows it takes and never the endpoint's history. A migration
-- of its own: the enum value `discord` added by the previous one cannot be used in the same transaction.
CREATE INDEX "deliveries_discord_due_idx" ON "deliveries" ("endpoint_id", "next_attempt_at")
  WHERE status = 'pending' AND transport = 'discord' AND parked_at IS NULL;
