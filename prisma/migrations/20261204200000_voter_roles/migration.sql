-- Voter roles (issue 32): a server's Discord bot (its token sealed with SECRETS_KEY), guild, role and duration, and one
-- grant row per (server, Discord user) whose role is to be added or removed; the role job claims due rows by due_at
-- (LIMITed batches) and deletes a grant once its role is removed, so the table holds only live roles.
-- CreateTable
CREATE TABLE "voter_role_settings" (
    "server_id" UUID NOT NULL,
    "bot_token_sealed" TEXT NOT NULL,
    "guild_id" TEXT NOT NULL,
    "role_id" TEXT NOT NULL,
    "duration_seconds" INTEGER NOT NULL,
    "last_error" TEXT,
    "last_error_at" TIMESTAMPTZ(3),
    "last_ok_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "voter_role_settings_pkey" PRIMARY KEY ("server_id")
);

-- CreateTable
CREATE TABLE "voter_role_grants" (
    "server_id" UUID NOT NULL,
    "discord_id" TEXT NOT NULL,
    "voter_identity" TEXT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "given" BOOLEAN NOT NULL DEFAULT false,
    "due_at" TIMESTAMPTZ(3) NOT NULL,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "voter_role_grants_pkey" PRIMARY KEY ("server_id","discord_id")
);

-- CreateIndex
CREATE INDEX "voter_role_grants_due_at_idx" ON "voter_role_grants"("due_at");

-- CreateIndex
CREATE INDEX "voter_role_grants_server_id_voter_identity_idx" ON "voter_role_grants"("server_id", "voter_identity");
