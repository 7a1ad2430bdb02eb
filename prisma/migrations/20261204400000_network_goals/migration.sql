-- Network goals (vote party, issue 31): an owner's target of counted votes across chosen servers, paid to the round's
-- voters or to the players online when reached. network_goal_hearts' primary key (goal_id, heart_id) counts a heart
-- once whatever redelivers it; the goal row is the one lock that orders counting, so a round is reached once, and
-- network_goal_rounds' primary key records it once. The delivery consumer's one probe per batch reads
-- network_goal_servers by its key's first column (server_id); the payer reads a partial index of unpaid rounds only;
-- retention reads the hearts' age key.

-- CreateTable
CREATE TABLE "network_goals" (
    "id" UUID NOT NULL,
    "owner_id" TEXT,
    "name" TEXT NOT NULL,
    "target" INTEGER NOT NULL,
    "payees" TEXT NOT NULL,
    "rewards" JSONB NOT NULL,
    "round" INTEGER NOT NULL DEFAULT 1,
    "progress" INTEGER NOT NULL DEFAULT 0,
    "counts_from" TIMESTAMPTZ(3) NOT NULL,
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "network_goals_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "network_goal_servers" (
    "server_id" UUID NOT NULL,
    "goal_id" UUID NOT NULL,

    CONSTRAINT "network_goal_servers_pkey" PRIMARY KEY ("server_id","goal_id")
);

-- CreateTable
CREATE TABLE "network_goal_hearts" (
    "goal_id" UUID NOT NULL,
    "heart_id" UUID NOT NULL,
    "counted_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "network_goal_hearts_pkey" PRIMARY KEY ("goal_id","heart_id")
);

-- CreateTable
CREATE TABLE "network_goal_voters" (
    "goal_id" UUID NOT NULL,
    "round" INTEGER NOT NULL,
    "voter_identity" TEXT NOT NULL,
    "server_id" UUID NOT NULL,
    "username" TEXT NOT NULL,
    "steam_id" TEXT,
    "discord_id" TEXT,
    "minecraft_uuid" TEXT,
    "account_id" TEXT,
    "last_counted_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "network_goal_voters_pkey" PRIMARY KEY ("goal_id","round","voter_identity")
);

-- CreateTable
CREATE TABLE "network_goal_rounds" (
    "goal_id" UUID NOT NULL,
    "round" INTEGER NOT NULL,
    "reached_at" TIMESTAMPTZ(3) NOT NULL,
    "paid_at" TIMESTAMPTZ(3),

    CONSTRAINT "network_goal_rounds_pkey" PRIMARY KEY ("goal_id","round")
);

-- CreateIndex
CREATE INDEX "network_goals_owner_id_idx" ON "network_goals"("owner_id");

-- CreateIndex
CREATE INDEX "network_goal_servers_goal_id_idx" ON "network_goal_servers"("goal_id");

-- CreateIndex
CREATE INDEX "network_goal_hearts_age_key_idx" ON "network_goal_hearts" ((counted_at AT TIME ZONE 'UTC'));

-- CreateIndex
CREATE INDEX "network_goal_voters_goal_id_voter_identity_idx" ON "network_goal_voters"("goal_id", "voter_identity");

-- CreateIndex
CREATE INDEX "network_goal_rounds_unpaid_idx" ON "network_goal_rounds"("reached_at", "goal_id", "round") WHERE "paid_at" IS NULL;
