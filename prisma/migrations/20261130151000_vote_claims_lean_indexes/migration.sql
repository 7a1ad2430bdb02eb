-- The claim ledger's indexes, made as small as their readers need and led by what their one reader gives (issue 29:
-- a claim and a cast with the ledger on cost more on a database with a history of ledger rows than on an empty one).
--
-- 1. Every lookup index is led by the player column (username_lower, a platform id, player_key), then server_id.
--    Led by server_id, each also served the other statements from its server_id prefix: for a server not yet in the
--    statistics (a new one, or one with new rows), every such prefix looks like one row, and the planner took any of
--    them: a claim by steam_id read every held row of the server through the held rows' index (filtering the
--    player's), a check read the server's rows through the player_key index, CastHeart's expiry read them through the
--    username index: a cost that grew with the server's rows, not the player's. Now a statement has a prefix of its
--    own index only.
-- 2. The platform ids' indexes are partial (WHERE <id> IS NOT NULL): a row was written to all four, three of them for
--    an id it does not have, and every claim and expiry (a state change that cannot be a HOT update, as state is in
--    the held index's predicate) wrote a new entry into each again. A lookup by an id is never a lookup of NULL.
-- 3. The (server_id, player_key, counted_at) index over every row is dropped: nothing reads it (the expiry reads the
--    held rows' index; a check or claim gives one id kind).
-- The partial indexes are written here, not in schema.prisma: Prisma's schema cannot express a partial index.

-- DropIndex
DROP INDEX "vote_claims_server_id_account_id_counted_at_idx";

-- DropIndex
DROP INDEX "vote_claims_server_id_discord_id_counted_at_idx";

-- DropIndex
DROP INDEX "vote_claims_server_id_minecraft_uuid_counted_at_idx";

-- DropIndex
DROP INDEX "vote_claims_server_id_player_key_counted_at_idx";

-- DropIndex
DROP INDEX "vote_claims_server_id_steam_id_counted_at_idx";

-- DropIndex
DROP INDEX "vote_claims_server_id_username_lower_counted_at_idx";

-- DropIndex
DROP INDEX "vote_claims_held_player_idx";

-- CreateIndex
CREATE INDEX "vote_claims_username_lower_server_id_counted_at_idx" ON "vote_claims"("username_lower", "server_id", "counted_at");

-- CreateIndex
CREATE INDEX "vote_claims_steam_id_idx" ON "vote_claims"("steam_id", "server_id", "counted_at") WHERE "steam_id" IS NOT NULL;

-- CreateIndex
CREATE INDEX "vote_claims_discord_id_idx" ON "vote_claims"("discord_id", "server_id", "counted_at") WHERE "discord_id" IS NOT NULL;

-- CreateIndex
CREATE INDEX "vote_claims_minecraft_uuid_idx" ON "vote_claims"("minecraft_uuid", "server_id", "counted_at") WHERE "minecraft_uuid" IS NOT NULL;

-- CreateIndex
CREATE INDEX "vote_claims_account_id_idx" ON "vote_claims"("account_id", "server_id", "counted_at") WHERE "account_id" IS NOT NULL;

-- CreateIndex
CREATE INDEX "vote_claims_held_player_idx" ON "vote_claims"("player_key", "server_id", "counted_at") WHERE "state" = 'held';
