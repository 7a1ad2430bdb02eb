-- The plugin-facing reward queue API (issue 31, docs/reward-queue.md) and its retention.
-- A plugin that names the players online is listed the pending entries that are not online-only plus each online
-- player's entries. The first part reads this index of the pending entries that are not online-only: a server whose
-- offline players hold thousands of online-only entries is still listed a page by reading about a page (the
-- per-player part reads reward_queue_entries_pending_player_idx, one bounded range per named player).
CREATE INDEX "reward_queue_entries_pending_anytime_idx" ON "reward_queue_entries" ("server_id", "created_at", "id")
  WHERE "acked_at" IS NULL AND NOT "online_only";
-- Acknowledged entries are removed RETENTION_REWARD_QUEUE_ACKED_DAYS after their acknowledgement
-- (services/rewards/reward-queue-store.ts, ackedRewardEntryRetention): the rule reads its due rows, oldest first,
-- through this index on the age key (acked_at in UTC, ageKeySql), partial to acknowledged rows, which no plugin read takes.
CREATE INDEX "reward_queue_entries_acked_age_key_idx" ON "reward_queue_entries" (("acked_at" AT TIME ZONE 'UTC'))
  WHERE "acked_at" IS NOT NULL;
