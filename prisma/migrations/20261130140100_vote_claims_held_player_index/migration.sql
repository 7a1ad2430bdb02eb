-- CastHeart's expiry of a player's older held hearts (expire_vote_claims, migration 20261130120000_vote_claims_cap_lock)
-- reads the player's HELD rows only: this partial index holds those alone, so the read is bounded by the per-player
-- cap (the function expires the rest at each vote), never by the player's years of claimed and expired rows.
-- Written here, not in schema.prisma: Prisma's schema cannot express a partial index (as the deliveries' ones).
CREATE INDEX "vote_claims_held_player_idx" ON "vote_claims"("server_id", "player_key", "counted_at") WHERE "state" = 'held';
