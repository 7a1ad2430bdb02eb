-- Retention of the reward rules' counts (voter_reward_states, with the voter's states after RETENTION_HEART_DAYS):
-- an index on the age key of last_counted_at (its value in UTC, an expression no hot read writes), so each batch reads
-- the oldest rows only and the queueing step's read by primary key can never take it.
CREATE INDEX "voter_reward_states_age_key_idx" ON "voter_reward_states" ((last_counted_at AT TIME ZONE 'UTC'));
