-- Three retention indexes shared their key with a hot path's read of the same table: heart_address_voters
-- (last_counted_at) beside the identity rules' (server_id, address, last_counted_at) range, and the address erasure's
-- partial (created_at) indexes of hearts and referral_clicks beside CastHeart's velocity read and the anti-abuse
-- reads ("from this address since ..."). For a time range its statistics think small, the planner took the retention
-- index for the hot path's read, which then read every row of the window across all keys (seen in
-- hearts-bounded-reads: 4 rows where 2 were the bound, on a table where the window held only the cast's own rows).
-- The retention rules now key by the age column in UTC (ageKeySql, services/shared/adapters/retention-rule.ts), an
-- expression no hot path writes, so these indexes can serve retention only.
DROP INDEX "heart_address_voters_last_counted_at_idx";
CREATE INDEX "heart_address_voters_age_key_idx" ON "heart_address_voters"(("last_counted_at" AT TIME ZONE 'UTC'));
DROP INDEX "hearts_address_held_idx";
CREATE INDEX "hearts_address_held_idx" ON "hearts"(("created_at" AT TIME ZONE 'UTC'))
  WHERE "ip" IS NOT NULL OR "subnet" IS NOT NULL OR "user_agent" IS NOT NULL;
DROP INDEX "referral_clicks_address_held_idx";
CREATE INDEX "referral_clicks_address_held_idx" ON "referral_clicks"(("created_at" AT TIME ZONE 'UTC'))
  WHERE "ip" IS NOT NULL OR "subnet" IS NOT NULL OR "user_agent" IS NOT NULL;
