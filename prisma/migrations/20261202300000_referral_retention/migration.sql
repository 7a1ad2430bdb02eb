-- Referral history ages out (issue 30: storage flat after the retention horizon). Three indexes for the two retention
-- rules (services/referral/record-click.ts unlinkedClickRetention, services/referral/apply-event.ts
-- endedReferralRetention):
-- - clicks that never registered anyone, by the age key of created_at (ageKeySql: the column in UTC, an expression no
--   hot path writes, so ApplyEvent's and the anti-abuse reads can never take it);
-- - referrals not held for review, by the age key of their last change (the latest of registered_at, qualified_at,
--   reversed_at and reviewed_at);
-- - a referral's clicks (referral_id): the rule removes them with the referral, and the foreign key's ON DELETE SET
--   NULL looks them up too (without it every removed referral read the whole clicks table).

-- CreateIndex
CREATE INDEX "referral_clicks_referral_id_idx" ON "referral_clicks"("referral_id");
CREATE INDEX "referral_clicks_unlinked_age_key_idx" ON "referral_clicks"(("created_at" AT TIME ZONE 'UTC'))
  WHERE "referral_id" IS NULL;
CREATE INDEX "referrals_last_change_age_key_idx"
  ON "referrals"((greatest("registered_at", "qualified_at", "reversed_at", "reviewed_at") AT TIME ZONE 'UTC'))
  WHERE "review" <> 'held';
