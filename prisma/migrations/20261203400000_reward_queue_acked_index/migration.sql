-- The acknowledged entries of one server by acknowledgement time (issue 31, bulk re-queue): an owner who lost a game
-- server re-queues what its plugin acknowledged in a time range. The re-queue reads this partial index in
-- (server_id, acked_at, id) order, a page at a time, never the server's whole queue history; pending entries are not in it.
CREATE INDEX "reward_queue_entries_acked_idx" ON "reward_queue_entries" ("server_id", "acked_at", "id") WHERE "acked_at" IS NOT NULL;
