-- plugin_activity: the reward plugins' recent check/claim calls per server (issue 33), at most one row per
-- (server, path, player id kind, outcome): bounded by design; rows 30 days old are deleted by the write itself.
-- CreateTable
CREATE TABLE "plugin_activity" (
    "server_id" UUID NOT NULL,
    "family" TEXT NOT NULL,
    "player_id_kind" TEXT NOT NULL,
    "outcome" TEXT NOT NULL,
    "calls" INTEGER NOT NULL,
    "since" TIMESTAMPTZ(3) NOT NULL,
    "last_at" TIMESTAMPTZ(3) NOT NULL,
    "last_action" TEXT NOT NULL,
    "last_answer" TEXT NOT NULL,
    "last_player_id" TEXT,

    CONSTRAINT "plugin_activity_pkey" PRIMARY KEY ("server_id","family","player_id_kind","outcome")
);

-- CreateIndex
CREATE INDEX "plugin_activity_last_at_idx" ON "plugin_activity"("last_at");
