-- The relay's claim reads unpublished rows in id order: a partial index holds only those,
-- so a claim never walks the published history (services/relay/relay.ts).
CREATE INDEX "outbox_unpublished_id_idx" ON "outbox"("id") WHERE "published_at" IS NULL;

-- Replaced by the partial index: every "mark published" update inserted into it as well.
DROP INDEX "outbox_published_at_shard_id_idx";

-- Wake on commit: every INSERT statement into the outbox notifies the relay, inside the writing
-- transaction, so the notification is delivered at its commit (never for a rolled-back write).
-- One empty payload per statement: PostgreSQL folds a transaction's identical notifications into
-- one. Channel name: OUTBOX_COMMITTED_CHANNEL in services/shared/outbox.ts.
CREATE FUNCTION "outbox_notify_committed"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('outbox_committed', '');
  RETURN NULL;
END
$$;

CREATE TRIGGER "outbox_committed" AFTER INSERT ON "outbox"
  FOR EACH STATEMENT EXECUTE FUNCTION "outbox_notify_committed"();
