import { addressVotersRetention, heartAddressesRetention, heartHistoryRetention, voterStatesRetention } from "../hearts/store.js";
import { clickAddressesRetention, unlinkedClickRetention } from "../referral/record-click.js";
import { endedReferralRetention } from "../referral/apply-event.js";
import { attemptExchangeRetention } from "../delivery/pipeline/attempt-log.js";
import { endedDeliveryRetention } from "../delivery/pipeline/write-deliveries.js";
import { deadLetterRetention } from "../shared/adapters/dead-letters.js";
import { expiredClaimRetention } from "../claims/write-vote-claims.js";
import { ackedRewardEntryRetention } from "../rewards/reward-queue-store.js";
import { networkGoalHeartsRetention } from "../rewards/network-goal-store.js";
import { expiredAccessRetention } from "../access/dashboard-sessions.js";
import { publishedOutboxRetention } from "../relay/statements.js";
import { voterRewardStatesRetention } from "../rewards/reward-queue-store.js";
import { voterPeriodTalliesRetention } from "../rewards/period-store.js";
import { endedReminderRetention } from "../reminders/reminder-store.js";
import { oldAlertRetention } from "../alerts/alert-store.js";
import type { RetentionRule } from "../shared/adapters/retention-rule.js";
import type { RetentionSettings } from "./retention-settings.js";

/**
 * THE list of retention rules the runner applies, in order, each built from its setting. A new kind of
 * data ages out by adding one line here (its factory, returning a RetentionRule, lives in the table's owner
 * module) and its setting in retention-settings.ts.
 */
export function retentionRules(settings: RetentionSettings): RetentionRule[] {
  return [
    publishedOutboxRetention(settings.publishedOutboxSeconds),
    attemptExchangeRetention(settings.attemptExchangeSeconds),
    deadLetterRetention(settings.deadLetterSeconds),
    expiredAccessRetention("dashboard_login_links", settings.dashboardExpiredSeconds),
    expiredAccessRetention("dashboard_sessions", settings.dashboardExpiredSeconds),
    expiredClaimRetention(settings.expiredClaimSeconds),
    addressVotersRetention(settings.addressVotersSeconds),
    // Voters' IP, subnet and user agent on hearts and clicks: erased (set to null) past the address horizon; their
    // keyed pseudonyms stay (services/shared/values/address-key.ts).
    heartAddressesRetention(settings.voterAddressSeconds),
    clickAddressesRetention(settings.voterAddressSeconds),
    // Ended deliveries with their attempts (FK cascade), past RETENTION_DELIVERY_DAYS: after the topics forgot their messages.
    endedDeliveryRetention(settings.deliverySeconds),
    // Hearts with their ledger rows and payouts (only once no delivery of the heart is left), and voter states.
    heartHistoryRetention(settings.heartSeconds),
    voterStatesRetention(settings.heartSeconds),
    // The reward rules' counts of a voter, with the voter's states.
    voterRewardStatesRetention(settings.heartSeconds),
    // The period standings' counts of a voter, long after their period closed.
    voterPeriodTalliesRetention(settings.heartSeconds),
    // Referral history: clicks that never registered anyone, then referrals past their last change with their clicks,
    // events and credit (a referral held for review stays).
    unlinkedClickRetention(settings.clickSeconds),
    endedReferralRetention(settings.referralSeconds),
    // Reward queue entries the plugin acknowledged, past RETENTION_REWARD_QUEUE_ACKED_DAYS (pending entries stay).
    ackedRewardEntryRetention(settings.rewardQueueAckedSeconds),
    // The hearts network goals counted, past the same horizon (longer than the topics keep a vote: no redelivery is left).
    networkGoalHeartsRetention(settings.rewardQueueAckedSeconds),
    // Vote reminders that ended (unsubscribed, bounced), with their address, past RETENTION_REMINDER_DAYS.
    endedReminderRetention(settings.endedReminderSeconds),
    // Owner alerts, sent or not, past RETENTION_OWNER_ALERT_DAYS.
    oldAlertRetention(settings.ownerAlertSeconds),
  ];
}
