-- CreateEnum
CREATE TYPE "ReferralState" AS ENUM ('registered', 'qualified', 'reversed');

-- CreateEnum
CREATE TYPE "SecretPurpose" AS ENUM ('referral', 'callback');

-- CreateEnum
CREATE TYPE "DeliveryStatus" AS ENUM ('pending', 'delivered', 'failed');

-- CreateTable
CREATE TABLE "servers" (
    "id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "referrals_enabled" BOOLEAN NOT NULL DEFAULT false,
    "registration_url" TEXT,
    "callback_url" TEXT,
    "standard_webhooks" BOOLEAN NOT NULL DEFAULT false,
    "callback_disabled_at" TIMESTAMPTZ(3),
    "callback_disabled_reason" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "servers_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "server_secrets" (
    "id" UUID NOT NULL,
    "server_id" UUID NOT NULL,
    "purpose" "SecretPurpose" NOT NULL,
    "kid" TEXT NOT NULL,
    "ciphertext" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3),
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "server_secrets_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "referral_clicks" (
    "id" UUID NOT NULL,
    "server_id" UUID NOT NULL,
    "referrer_identity" TEXT NOT NULL,
    "token" TEXT NOT NULL,
    "referral_id" UUID,
    "ip" TEXT,
    "user_agent" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "referral_clicks_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "referrals" (
    "id" UUID NOT NULL,
    "server_id" UUID NOT NULL,
    "referee_identity" TEXT NOT NULL,
    "referrer_identity" TEXT NOT NULL,
    "state" "ReferralState" NOT NULL,
    "version" INTEGER NOT NULL DEFAULT 1,
    "registered_at" TIMESTAMPTZ(3) NOT NULL,
    "qualified_at" TIMESTAMPTZ(3),
    "reversed_at" TIMESTAMPTZ(3),

    CONSTRAINT "referrals_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "referral_events" (
    "id" BIGSERIAL NOT NULL,
    "token" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "server_event_id" TEXT NOT NULL,
    "server_id" UUID NOT NULL,
    "referral_id" UUID,
    "outcome" TEXT NOT NULL,
    "kid" TEXT,
    "caller_ts" BIGINT,
    "received_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "referral_events_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "referral_credits" (
    "referral_id" UUID NOT NULL,
    "server_id" UUID NOT NULL,
    "referrer_identity" TEXT NOT NULL,
    "period" TEXT NOT NULL,
    "credited_at" TIMESTAMPTZ(3) NOT NULL,
    "reversed_at" TIMESTAMPTZ(3),

    CONSTRAINT "referral_credits_pkey" PRIMARY KEY ("referral_id")
);

-- CreateTable
CREATE TABLE "hearts" (
    "id" UUID NOT NULL,
    "server_id" UUID NOT NULL,
    "username" TEXT NOT NULL,
    "voter_identity" TEXT NOT NULL,
    "ip" TEXT NOT NULL,
    "subnet" TEXT NOT NULL,
    "user_agent" TEXT NOT NULL,
    "counted" BOOLEAN NOT NULL,
    "verdict" TEXT NOT NULL,
    "fraud_score" INTEGER NOT NULL,
    "fraud_reasons" TEXT[],
    "period" TEXT NOT NULL,
    "streak_day" INTEGER,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "hearts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "voter_states" (
    "server_id" UUID NOT NULL,
    "voter_identity" TEXT NOT NULL,
    "last_counted_at" TIMESTAMPTZ(3) NOT NULL,
    "last_day" DATE NOT NULL,
    "streak_days" INTEGER NOT NULL,

    CONSTRAINT "voter_states_pkey" PRIMARY KEY ("server_id","voter_identity")
);

-- CreateTable
CREATE TABLE "server_rankings" (
    "server_id" UUID NOT NULL,
    "period" TEXT NOT NULL,
    "hearts" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "server_rankings_pkey" PRIMARY KEY ("server_id","period")
);

-- CreateTable
CREATE TABLE "outbox" (
    "id" BIGSERIAL NOT NULL,
    "topic" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "payload" BYTEA NOT NULL,
    "shard" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "published_at" TIMESTAMPTZ(3),

    CONSTRAINT "outbox_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "deliveries" (
    "id" UUID NOT NULL,
    "server_id" UUID NOT NULL,
    "heart_id" UUID NOT NULL,
    "event_type" TEXT NOT NULL,
    "username" TEXT NOT NULL,
    "voter_identity" TEXT NOT NULL,
    "period" TEXT NOT NULL,
    "streak_day" INTEGER,
    "counted_at" TIMESTAMPTZ(3) NOT NULL,
    "status" "DeliveryStatus" NOT NULL DEFAULT 'pending',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lease_until" TIMESTAMPTZ(3),
    "last_status_code" INTEGER,
    "last_error" TEXT,
    "delivered_at" TIMESTAMPTZ(3),
    "failed_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "deliveries_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "delivery_attempts" (
    "id" BIGSERIAL NOT NULL,
    "delivery_id" UUID NOT NULL,
    "attempt" INTEGER NOT NULL,
    "url" TEXT NOT NULL,
    "started_at" TIMESTAMPTZ(3) NOT NULL,
    "status_code" INTEGER,
    "latency_ms" INTEGER NOT NULL,
    "error" TEXT,

    CONSTRAINT "delivery_attempts_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "server_secrets_server_id_purpose_created_at_idx" ON "server_secrets"("server_id", "purpose", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "server_secrets_server_id_purpose_kid_key" ON "server_secrets"("server_id", "purpose", "kid");

-- CreateIndex
CREATE UNIQUE INDEX "referral_clicks_token_key" ON "referral_clicks"("token");

-- CreateIndex
CREATE INDEX "referral_clicks_server_id_created_at_idx" ON "referral_clicks"("server_id", "created_at");

-- CreateIndex
CREATE INDEX "referral_clicks_server_id_referrer_identity_idx" ON "referral_clicks"("server_id", "referrer_identity");

-- CreateIndex
CREATE INDEX "referrals_server_id_referrer_identity_idx" ON "referrals"("server_id", "referrer_identity");

-- CreateIndex
CREATE UNIQUE INDEX "referrals_server_id_referee_identity_key" ON "referrals"("server_id", "referee_identity");

-- CreateIndex
CREATE INDEX "referral_events_server_id_received_at_idx" ON "referral_events"("server_id", "received_at");

-- CreateIndex
CREATE UNIQUE INDEX "referral_events_token_type_server_event_id_key" ON "referral_events"("token", "type", "server_event_id");

-- CreateIndex
CREATE INDEX "referral_credits_server_id_period_idx" ON "referral_credits"("server_id", "period");

-- CreateIndex
CREATE INDEX "referral_credits_server_id_referrer_identity_idx" ON "referral_credits"("server_id", "referrer_identity");

-- CreateIndex
CREATE INDEX "hearts_server_id_voter_identity_created_at_idx" ON "hearts"("server_id", "voter_identity", "created_at");

-- CreateIndex
CREATE INDEX "hearts_ip_created_at_idx" ON "hearts"("ip", "created_at");

-- CreateIndex
CREATE INDEX "hearts_subnet_created_at_idx" ON "hearts"("subnet", "created_at");

-- CreateIndex
CREATE INDEX "server_rankings_period_hearts_idx" ON "server_rankings"("period", "hearts");

-- CreateIndex
CREATE INDEX "outbox_published_at_shard_id_idx" ON "outbox"("published_at", "shard", "id");

-- CreateIndex
CREATE INDEX "deliveries_status_next_attempt_at_idx" ON "deliveries"("status", "next_attempt_at");

-- CreateIndex
CREATE INDEX "deliveries_server_id_status_created_at_idx" ON "deliveries"("server_id", "status", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "deliveries_heart_id_server_id_key" ON "deliveries"("heart_id", "server_id");

-- CreateIndex
CREATE INDEX "delivery_attempts_delivery_id_attempt_idx" ON "delivery_attempts"("delivery_id", "attempt");

-- AddForeignKey
ALTER TABLE "server_secrets" ADD CONSTRAINT "server_secrets_server_id_fkey" FOREIGN KEY ("server_id") REFERENCES "servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "referral_clicks" ADD CONSTRAINT "referral_clicks_server_id_fkey" FOREIGN KEY ("server_id") REFERENCES "servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "referral_clicks" ADD CONSTRAINT "referral_clicks_referral_id_fkey" FOREIGN KEY ("referral_id") REFERENCES "referrals"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "referrals" ADD CONSTRAINT "referrals_server_id_fkey" FOREIGN KEY ("server_id") REFERENCES "servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "referral_credits" ADD CONSTRAINT "referral_credits_referral_id_fkey" FOREIGN KEY ("referral_id") REFERENCES "referrals"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "deliveries" ADD CONSTRAINT "deliveries_server_id_fkey" FOREIGN KEY ("server_id") REFERENCES "servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "delivery_attempts" ADD CONSTRAINT "delivery_attempts_delivery_id_fkey" FOREIGN KEY ("delivery_id") REFERENCES "deliveries"("id") ON DELETE CASCADE ON UPDATE CASCADE;
