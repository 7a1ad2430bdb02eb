-- CastHeart's identity fraud rules read a maintained set instead of the hearts (services/hearts/store.ts): per
-- (server, address, voter) the time of the voter's latest counted heart from that address, where the address is the
-- heart's IP or its subnet. "Distinct voters from this address in the window" becomes a range of the window index,
-- one row per voter, read with LIMIT: bounded by the rule's maximum, not by the address's history.

-- CreateTable
CREATE TABLE "heart_address_voters" (
    "server_id" UUID NOT NULL,
    "address" TEXT NOT NULL,
    "voter_identity" TEXT NOT NULL,
    "last_counted_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "heart_address_voters_pkey" PRIMARY KEY ("server_id","address","voter_identity")
);

-- CreateIndex
CREATE INDEX "heart_address_voters_server_id_address_last_counted_at_idx" ON "heart_address_voters"("server_id", "address", "last_counted_at");

-- The set as the hearts already stored imply it (every counted heart, so a rule with any window answers as before).
INSERT INTO "heart_address_voters" ("server_id", "address", "voter_identity", "last_counted_at")
SELECT h."server_id", a."address", h."voter_identity", max(h."created_at")
FROM "hearts" h CROSS JOIN LATERAL (VALUES (h."ip"), (h."subnet")) AS a("address")
WHERE h."counted"
GROUP BY h."server_id", a."address", h."voter_identity";
