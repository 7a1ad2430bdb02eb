-- Network goals can be deleted (DeleteNetworkGoal) and listed (ListNetworkGoals). A deleted goal keeps its row with
-- `deleted_at` set, so the rounds it reached before are still paid (the payer reads its rewards and servers), while it
-- counts no more votes and no one lists or reads it. ListNetworkGoals pages an owner's live goals by (created_at, id)
-- through a partial index of live goals only, so deleted goals cost a page nothing.

-- AlterTable
ALTER TABLE "network_goals" ADD COLUMN     "deleted_at" TIMESTAMPTZ(3);

-- CreateIndex
CREATE INDEX "network_goals_owner_live_idx" ON "network_goals"("owner_id", "created_at", "id") WHERE "deleted_at" IS NULL;
