-- A voter's export and erasure read the reward entries of the voter's hearts: an index on (server_id, heart_id), so
-- each batch of hearts reads their few entries, never the server's queue.

-- CreateIndex
CREATE INDEX "reward_queue_entries_server_id_heart_id_idx" ON "reward_queue_entries"("server_id", "heart_id");
