-- Retention (issue 30): every rule of services/retention finds the rows past its age limit as a range of an index
-- led by the rule's age column, oldest first, never by a scan of the table. The partial indexes hold only the rows a
-- rule may still act on, so rows already removed or erased leave them and the range's start is always a due row.
-- The partial indexes are written here, not in schema.prisma: Prisma's schema cannot express a partial index.

-- Login links and sessions: removed once expired longer than the margin.
-- CreateIndex
CREATE INDEX "dashboard_login_links_expires_at_idx" ON "dashboard_login_links"("expires_at");

-- CreateIndex
CREATE INDEX "dashboard_sessions_expires_at_idx" ON "dashboard_sessions"("expires_at");

-- The identity rules' set: removed once older than the longest identity window plus a margin.
-- CreateIndex
CREATE INDEX "heart_address_voters_last_counted_at_idx" ON "heart_address_voters"("last_counted_at");

-- Published outbox rows, removed soon after publishing. Unpublished rows are not in it (the relay's own partial index
-- of unpublished ids serves the relay).
CREATE INDEX "outbox_published_at_idx" ON "outbox"("published_at") WHERE "published_at" IS NOT NULL;

-- Expired claim-ledger rows: expired is final (no statement moves a row out of it), so the rows past the margin go.
CREATE INDEX "vote_claims_expired_at_idx" ON "vote_claims"("expired_at") WHERE "state" = 'expired';

-- Delivery attempts that still hold their exchange (headers or bodies): once dropped, the row leaves the index.
CREATE INDEX "delivery_attempts_exchange_started_at_idx" ON "delivery_attempts"("started_at", "id")
  WHERE "request_headers" IS NOT NULL OR "request_body" IS NOT NULL OR "response_headers" IS NOT NULL OR "response_body" IS NOT NULL;
