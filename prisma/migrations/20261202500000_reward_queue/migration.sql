-- The per-player reward queue (issue 31): the entries a server's reward rules give, which a game plugin lists and
-- acknowledges, and per voter what the rules count (totals, the reward streak). The two partial indexes serve the
-- plugin's reads of pending entries only (an acknowledged entry leaves them): a server's whole queue, oldest first,
-- and one online player's entries, each read as a bounded range whatever the server's history.

-- CreateTable
CREATE TABLE "voter_reward_states" (
    "server_id" UUID NOT NULL,
    "voter_identity" TEXT NOT NULL,
    "last_counted_at" TIMESTAMPTZ(3) NOT NULL,
    "total" INTEGER NOT NULL,
    "month" TEXT NOT NULL,
    "month_total" INTEGER NOT NULL,
    "week" TEXT NOT NULL,
    "week_total" INTEGER NOT NULL,
    "streak_last_day" DATE NOT NULL,
    "streak_days" INTEGER NOT NULL,

    CONSTRAINT "voter_reward_states_pkey" PRIMARY KEY ("server_id","voter_identity")
);

-- CreateTable
CREATE TABLE "reward_queue_entries" (
    "id" UUID NOT NULL DEFAULT uuid_v7(),
    "server_id" UUID NOT NULL,
    "entry_key" TEXT NOT NULL,
    "reason" TEXT NOT NULL,
    "heart_id" UUID,
    "username" TEXT NOT NULL,
    "username_lower" TEXT NOT NULL,
    "steam_id" TEXT,
    "discord_id" TEXT,
    "minecraft_uuid" TEXT,
    "account_id" TEXT,
    "commands" TEXT[],
    "online_only" BOOLEAN NOT NULL,
    "rules_version" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "acked_at" TIMESTAMPTZ(3),

    CONSTRAINT "reward_queue_entries_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "reward_queue_entries_server_id_entry_key_key" ON "reward_queue_entries"("server_id", "entry_key");

-- AddForeignKey
ALTER TABLE "reward_queue_entries" ADD CONSTRAINT "reward_queue_entries_server_id_fkey" FOREIGN KEY ("server_id") REFERENCES "servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- The pending entries of a server, oldest first (the plugin's whole-queue page), and of one player.
CREATE INDEX "reward_queue_entries_pending_idx" ON "reward_queue_entries" ("server_id", "created_at", "id") WHERE "acked_at" IS NULL;
CREATE INDEX "reward_queue_entries_pending_player_idx" ON "reward_queue_entries" ("server_id", "username_lower", "created_at") WHERE "acked_at" IS NULL;
