-- Issue 30: a voter's IP address, subnet and user agent are kept on hearts and referral clicks only as long as the
-- longest fraud and anti-abuse window plus a margin (ADDRESS_RETENTION_HOURS, 48 h by default), then erased (set to
-- NULL) by a batched pass (eraseHeartAddresses in services/hearts/store.ts, eraseClickAddresses in
-- services/referral/record-click.ts). So the three columns become nullable on hearts (clicks already allowed NULL).
--
-- What the self-referral-by-address rule needs after the erasure (the "same address" link between a referrer's hearts
-- and a referee's click or hearts, of any age) is kept as keyed pseudonyms, ip_key and subnet_key: HMAC-SHA256 of the
-- address under a key the service derives from SECRETS_KEY (services/shared/values/address-key.ts), never the address.
-- Rows written before this migration carry none (NULL): the rule compares their addresses while they are held.
ALTER TABLE "hearts" ADD COLUMN     "ip_key" TEXT,
ADD COLUMN     "subnet_key" TEXT,
ALTER COLUMN "ip" DROP NOT NULL,
ALTER COLUMN "subnet" DROP NOT NULL,
ALTER COLUMN "user_agent" DROP NOT NULL;

ALTER TABLE "referral_clicks" ADD COLUMN     "ip_key" TEXT,
ADD COLUMN     "subnet_key" TEXT;

-- The erasure pass reads the rows still holding an address, oldest first: these partial indexes hold only those, so
-- a pass reads the rows it erases (and stops at the first one younger than the horizon), never the table; an erased
-- row leaves the index. Written here, not in schema.prisma: Prisma's schema cannot express a partial index.
CREATE INDEX "hearts_address_held_idx" ON "hearts"("created_at")
  WHERE "ip" IS NOT NULL OR "subnet" IS NOT NULL OR "user_agent" IS NOT NULL;
CREATE INDEX "referral_clicks_address_held_idx" ON "referral_clicks"("created_at")
  WHERE "ip" IS NOT NULL OR "subnet" IS NOT NULL OR "user_agent" IS NOT NULL;
