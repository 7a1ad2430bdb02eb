-- Anti-abuse fan-out reads only the LINKED clicks from an address or subnet in its window (services/referral/abuse-facts.ts):
-- these partial indexes hold those alone, so the anonymous clicks an address can make at will cost the read nothing.
-- Written here, not in schema.prisma: Prisma's schema cannot express a partial index (as the deliveries' ones).
CREATE INDEX "referral_clicks_linked_ip_idx" ON "referral_clicks"("server_id", "ip", "created_at") WHERE "referral_id" IS NOT NULL;
CREATE INDEX "referral_clicks_linked_subnet_idx" ON "referral_clicks"("server_id", "subnet", "created_at") WHERE "referral_id" IS NOT NULL;
