-- Hearts and voter states grew for ever (issue 30: the database's size should stay flat past the retention horizon).
-- Retention now removes a heart (with its claim-ledger row and its pay-once payout) once older than
-- RETENTION_HEART_DAYS and without any delivery left, and a voter state whose voter last counted longer ago than the
-- same horizon (services/hearts/store.ts, heartHistoryRetention and voterStatesRetention). Each rule reads its due
-- rows, oldest first, through an index on its age column in UTC (ageKeySql, services/shared/adapters/retention-rule.ts):
-- an expression no hot path writes, so CastHeart's, the dashboard's and the receipt's reads can never take it.
-- The hearts index ends with id: the rule's cursor steps over hearts kept by a delivery by (age key, id), so a batch
-- never reads them again.
CREATE INDEX "hearts_age_key_idx" ON "hearts"(("created_at" AT TIME ZONE 'UTC'), "id");
CREATE INDEX "voter_states_age_key_idx" ON "voter_states"(("last_counted_at" AT TIME ZONE 'UTC'));
