-- Reward rules per server (issue 31): every saved version is kept (the current rules are the highest version,
-- one entry of the primary key); the draw seed keys the lucky draws and is carried from version to version.
-- CreateTable
CREATE TABLE "reward_rule_versions" (
    "server_id" UUID NOT NULL,
    "version" INTEGER NOT NULL,
    "rules" JSONB NOT NULL,
    "draw_seed" TEXT NOT NULL,
    "saved_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "reward_rule_versions_pkey" PRIMARY KEY ("server_id","version")
);

-- AddForeignKey
ALTER TABLE "reward_rule_versions" ADD CONSTRAINT "reward_rule_versions_server_id_fkey" FOREIGN KEY ("server_id") REFERENCES "servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;
