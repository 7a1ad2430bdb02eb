-- Callback endpoints: the callback settings, secrets, deliveries and health of a server move from
-- the server row to its endpoints. Every existing server gets a default endpoint carrying its
-- current settings (subscribed to heart.counted, payload version 1), its callback secrets move to
-- that endpoint, its callback deliveries and health belong to it, and the server-level columns go.

-- CreateTable
CREATE TABLE "callback_endpoints" (
    "id" UUID NOT NULL,
    "server_id" UUID NOT NULL,
    "is_default" BOOLEAN,
    "url" TEXT,
    "event_types" TEXT[],
    "payload_version" INTEGER NOT NULL DEFAULT 1,
    "standard_webhooks" BOOLEAN NOT NULL DEFAULT false,
    "public_key_signatures" BOOLEAN NOT NULL DEFAULT false,
    "disabled_at" TIMESTAMPTZ(3),
    "disabled_reason" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deleted_at" TIMESTAMPTZ(3),

    CONSTRAINT "callback_endpoints_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "callback_endpoints_server_id_created_at_idx" ON "callback_endpoints"("server_id", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "callback_endpoints_server_id_is_default_key" ON "callback_endpoints"("server_id", "is_default");

-- AddForeignKey
ALTER TABLE "callback_endpoints" ADD CONSTRAINT "callback_endpoints_server_id_fkey" FOREIGN KEY ("server_id") REFERENCES "servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Data migration: one default endpoint per existing server, with its callback settings.
INSERT INTO "callback_endpoints" ("id", "server_id", "is_default", "url", "event_types", "standard_webhooks", "public_key_signatures",
                                  "disabled_at", "disabled_reason", "created_at")
SELECT gen_random_uuid(), s."id", true, s."callback_url", ARRAY['heart.counted'], s."standard_webhooks", s."public_key_signatures",
       s."callback_disabled_at", s."callback_disabled_reason", s."created_at"
FROM "servers" s;

-- Every new server gets its default endpoint (no URL yet: its callback deliveries are held until
-- SetCallbackSettings sets one) in the transaction that inserts it, however it is inserted.
CREATE FUNCTION "servers_create_default_endpoint"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "callback_endpoints" ("id", "server_id", "is_default", "event_types", "created_at")
  VALUES (gen_random_uuid(), NEW."id", true, ARRAY['heart.counted'], NEW."created_at");
  RETURN NULL;
END
$$;

CREATE TRIGGER "servers_default_endpoint" AFTER INSERT ON "servers"
  FOR EACH ROW EXECUTE FUNCTION "servers_create_default_endpoint"();

-- Callback secrets belong to an endpoint: the existing ones to the server's default endpoint.
ALTER TABLE "server_secrets" ADD COLUMN "endpoint_id" UUID;
UPDATE "server_secrets" k SET "endpoint_id" = e."id"
FROM "callback_endpoints" e
WHERE k."purpose" = 'callback' AND e."server_id" = k."server_id" AND e."is_default";
CREATE INDEX "server_secrets_endpoint_id_created_at_idx" ON "server_secrets"("endpoint_id", "created_at");
ALTER TABLE "server_secrets" ADD CONSTRAINT "server_secrets_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "callback_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Callback deliveries belong to an endpoint: the existing ones to the server's default endpoint.
ALTER TABLE "deliveries" ADD COLUMN "endpoint_id" UUID;
UPDATE "deliveries" d SET "endpoint_id" = e."id"
FROM "callback_endpoints" e
WHERE d."transport" = 'callback' AND e."server_id" = d."server_id" AND e."is_default";
ALTER TABLE "deliveries" ADD CONSTRAINT "deliveries_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "callback_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Unique per (server, transport, endpoint, dedup_key), a null endpoint (Votifier, pull) being one
-- value (NULLS NOT DISTINCT, which Prisma's schema cannot express): a redelivered Kafka message
-- still adds nothing. The consumer's ON CONFLICT names these columns (insert-deliveries.ts).
DROP INDEX "deliveries_server_id_transport_dedup_key_key";
CREATE UNIQUE INDEX "deliveries_server_id_transport_endpoint_id_dedup_key_key" ON "deliveries"("server_id", "transport", "endpoint_id", "dedup_key") NULLS NOT DISTINCT;

-- Endpoint health: per endpoint (the server's row becomes its default endpoint's).
ALTER TABLE "callback_health" ADD COLUMN "endpoint_id" UUID;
UPDATE "callback_health" h SET "endpoint_id" = e."id"
FROM "callback_endpoints" e
WHERE e."server_id" = h."server_id" AND e."is_default";
ALTER TABLE "callback_health" DROP CONSTRAINT "callback_health_pkey",
ALTER COLUMN "endpoint_id" SET NOT NULL,
ADD CONSTRAINT "callback_health_pkey" PRIMARY KEY ("endpoint_id");
CREATE INDEX "callback_health_server_id_idx" ON "callback_health"("server_id");
ALTER TABLE "callback_health" ADD CONSTRAINT "callback_health_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "callback_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- One home: the server-level callback columns go.
ALTER TABLE "servers" DROP COLUMN "callback_disabled_at",
DROP COLUMN "callback_disabled_reason",
DROP COLUMN "callback_url",
DROP COLUMN "public_key_signatures",
DROP COLUMN "standard_webhooks";
