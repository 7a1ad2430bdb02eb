-- Period awards paid once (issue 31): per voter, server and period (UTC month "YYYY-MM", ISO week "YYYY-Www") the
-- counted votes the standings are read from, and per server and period whether it was closed. The period closer sets
-- closed_at in the same transaction that queues the awards and writes the period.closed event, and the primary key
-- (server_id, kind, period) is the one row a close changes, so a period is paid once even with two closers or a clock
-- that jumps back. The standings are the top of an index (votes DESC, then who reached the count first); the closer's
-- batch reads a partial index of the open periods only; retention reads the tallies' age key.

-- CreateTable
CREATE TABLE "voter_period_tallies" (
    "server_id" UUID NOT NULL,
    "period" TEXT NOT NULL,
    "voter_identity" TEXT NOT NULL,
    "votes" INTEGER NOT NULL,
    "last_counted_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "voter_period_tallies_pkey" PRIMARY KEY ("server_id","voter_identity","period")
);

-- CreateTable
CREATE TABLE "reward_periods" (
    "server_id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "period" TEXT NOT NULL,
    "ends_at" TIMESTAMPTZ(3) NOT NULL,
    "closed_at" TIMESTAMPTZ(3),

    CONSTRAINT "reward_periods_pkey" PRIMARY KEY ("server_id","kind","period")
);

-- CreateIndex
CREATE INDEX "voter_period_tallies_standings_idx" ON "voter_period_tallies"("server_id", "period", "votes" DESC, "last_counted_at", "voter_identity");

-- The closer's batch: open periods by end, oldest first; a closed period leaves the index.
CREATE INDEX "reward_periods_open_idx" ON "reward_periods" ("ends_at") WHERE "closed_at" IS NULL;

-- Retention of the tallies (RETENTION_HEART_DAYS after the voter's last counted vote of the period): the age key.
CREATE INDEX "voter_period_tallies_age_key_idx" ON "voter_period_tallies" ((last_counted_at AT TIME ZONE 'UTC'));
