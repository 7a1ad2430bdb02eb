-- Vote reminders by e-mail (issue 32): one row per (server, voter) opted in from a receipt page, double opt-in,
-- one reminder per counted heart; the sender claims due rows by next_send_at (LIMITed batches), retention removes
-- ended rows by ended_at.
-- CreateTable
CREATE TABLE "vote_reminders" (
    "id" UUID NOT NULL,
    "server_id" UUID NOT NULL,
    "voter_identity" TEXT NOT NULL,
    "email" TEXT NOT NULL,
    "state" TEXT NOT NULL,
    "confirm_token_hash" BYTEA,
    "unsubscribe_nonce" BYTEA NOT NULL,
    "next_send_at" TIMESTAMPTZ(3),
    "reminded_heart_at" TIMESTAMPTZ(3),
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "ended_at" TIMESTAMPTZ(3),

    CONSTRAINT "vote_reminders_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "vote_reminders_next_send_at_idx" ON "vote_reminders"("next_send_at");

-- CreateIndex
CREATE INDEX "vote_reminders_ended_at_idx" ON "vote_reminders"("ended_at");

-- CreateIndex
CREATE UNIQUE INDEX "vote_reminders_server_id_voter_identity_key" ON "vote_reminders"("server_id", "voter_identity");
