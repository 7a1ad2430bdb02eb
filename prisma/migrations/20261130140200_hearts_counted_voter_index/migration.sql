-- A receipt of a heart refused by the cooldown shows when the cooldown ends, from the voter's counted heart before it
-- (services/hearts/get-receipt.ts). This partial index holds the counted hearts alone, so that read is one index entry,
-- never every refused heart a voter (or a script) cast since. Written here, not in schema.prisma: Prisma's schema cannot
-- express a partial index (as the deliveries' ones).
CREATE INDEX "hearts_counted_voter_idx" ON "hearts"("server_id", "voter_identity", "created_at") WHERE "counted";
