-- The alert digest sender claims ONE owner's waiting alerts (owner_id = $1 AND send_after <= now ORDER BY send_after,
-- id LIMIT n, alert-store.ts claimDigestSql). Neither (send_after) (every owner's waiting alerts, filtered by owner)
-- nor (owner_id, created_at) (the owner's whole history) reads only those: after a list-wide outage, 5,000 owners with
-- one alert each made every claim read the whole backlog. This index holds only waiting alerts (send_after set) and
-- is read in the claim's order: a claim reads at most its LIMIT rows of its owner. Partial, so written here (Prisma's
-- schema cannot express it; schema.prisma's OwnerAlert names it).
CREATE INDEX "owner_alerts_owner_waiting_idx" ON "owner_alerts"("owner_id", "send_after", "id") WHERE "send_after" IS NOT NULL;
