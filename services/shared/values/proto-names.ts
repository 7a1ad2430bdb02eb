import { DeliveryStatus, DeliveryTransport, PullClaimStatus } from "../../../gen/proto/delivery/v1/delivery_pb.js";
import { PlayerIdKind } from "../../../gen/proto/claims/v1/claims_pb.js";
import { PluginCallOutcome } from "../../../gen/proto/claims/v1/plugin_activity_pb.js";
import { HeartVerdict } from "../../../gen/proto/hearts/v1/hearts_pb.js";
import { ReferralEventType, ReferralState } from "../../../gen/proto/referral/v1/referral_pb.js";
import { ExportFormat, ReviewAction, ReviewMode, ReviewState } from "../../../gen/proto/referral/v1/referral_review_pb.js";
import type { AnchorState, ReferralEventName } from "./contract.js";

/**
 * The names the database, the contract and the dashboard use <-> the proto enums the services and
 * the gateway exchange: each table written once, name -> enum, and read backwards with
 * `namesOf` (an enum value outside the table, such as UNSPECIFIED, has no name). Pure.
 */

/** A referral lifecycle event (the contract's `event`). */
export const REFERRAL_EVENT_TO_PROTO = {
  registered: ReferralEventType.REGISTERED,
  qualified: ReferralEventType.QUALIFIED,
  reversed: ReferralEventType.REVERSED,
} as const satisfies Record<ReferralEventName, ReferralEventType>;

/** The state of a minted anchor (the contract's `state`). */
export const ANCHOR_STATE_TO_PROTO = {
  registered: ReferralState.REGISTERED,
  qualified: ReferralState.QUALIFIED,
  reversed: ReferralState.REVERSED,
} as const satisfies Record<AnchorState, ReferralState>;

/** A stored delivery's status. */
export const DELIVERY_STATUS_TO_PROTO = {
  pending: DeliveryStatus.PENDING,
  delivered: DeliveryStatus.DELIVERED,
  failed: DeliveryStatus.FAILED,
  withdrawn: DeliveryStatus.WITHDRAWN,
} as const;

/** A stored delivery's transport. */
export const DELIVERY_TRANSPORT_TO_PROTO = {
  callback: DeliveryTransport.CALLBACK,
  votifier: DeliveryTransport.VOTIFIER,
  pull: DeliveryTransport.PULL,
  discord: DeliveryTransport.DISCORD,
} as const;

/** One heart's outcome of a pull claim. */
export const PULL_CLAIM_STATUS_TO_PROTO = {
  claimed: PullClaimStatus.CLAIMED,
  already_claimed: PullClaimStatus.ALREADY_CLAIMED,
  unknown: PullClaimStatus.UNKNOWN,
} as const;

/** The stored verdict text (hearts.verdict, also the dashboard API's) <-> the proto enum. */
export const VERDICT_TO_PROTO: Readonly<Record<string, HeartVerdict>> = {
  counted: HeartVerdict.COUNTED,
  cooldown: HeartVerdict.COOLDOWN,
  fraud: HeartVerdict.FRAUD,
};
/** The proto enum -> the stored verdict text ("" for UNSPECIFIED: no filter). */
export const VERDICT_FROM_PROTO: Readonly<Partial<Record<HeartVerdict, string>>> = {
  [HeartVerdict.UNSPECIFIED]: "",
  ...Object.fromEntries(Object.entries(VERDICT_TO_PROTO).map(([name, value]) => [value, name])),
};

/** A referral's anti-abuse review state (referrals.review). */
export const REVIEW_STATE_TO_PROTO = {
  none: ReviewState.NONE,
  held: ReviewState.HELD,
  approved: ReviewState.APPROVED,
  declined: ReviewState.DECLINED,
} as const;

/** A server's anti-abuse mode (servers.referral_review_mode). */
export const REVIEW_MODE_TO_PROTO = { off: ReviewMode.OFF, loose: ReviewMode.LOOSE, strict: ReviewMode.STRICT } as const;

/** The owner's review decision. */
export const REVIEW_ACTION_TO_PROTO = { approve: ReviewAction.APPROVE, decline: ReviewAction.DECLINE } as const;

/** An export's format. */
export const EXPORT_FORMAT_TO_PROTO = { csv: ExportFormat.CSV, json: ExportFormat.JSON } as const;

/** A reward plugin's player id kind (plugin_activity.player_id_kind, the dashboard's plugin activity card). */
export const PLAYER_ID_KIND_TO_PROTO = {
  steam_id: PlayerIdKind.STEAM_ID,
  username: PlayerIdKind.USERNAME,
  discord_id: PlayerIdKind.DISCORD_ID,
  minecraft_uuid: PlayerIdKind.MINECRAFT_UUID,
  account_id: PlayerIdKind.ACCOUNT_ID,
} as const;

/** What a reward plugin's check/claim call got, in the owner's terms (plugin_activity.outcome). */
export const PLUGIN_CALL_OUTCOME_TO_PROTO = {
  ok: PluginCallOutcome.OK,
  never_voted: PluginCallOutcome.NEVER_VOTED,
  wrong_key: PluginCallOutcome.WRONG_KEY,
  malformed_id: PluginCallOutcome.MALFORMED_ID,
} as const;

/** A name -> enum table read backwards: enum value -> name. */
export function namesOf<N extends string, P extends number>(toProto: Readonly<Record<N, P>>): Readonly<Partial<Record<P, N>>> {
  return Object.fromEntries(Object.entries<P>(toProto).map(([name, value]) => [value, name])) as Partial<Record<P, N>>;
}

/** Enum value -> name, for any value of the enum `E` (those outside the table have none). */
export type NamesOf<E extends number, T> = Readonly<Partial<Record<E, keyof T>>>;

export const REFERRAL_EVENT_NAMES: NamesOf<ReferralEventType, typeof REFERRAL_EVENT_TO_PROTO> = namesOf(REFERRAL_EVENT_TO_PROTO);
export const ANCHOR_STATE_NAMES: NamesOf<ReferralState, typeof ANCHOR_STATE_TO_PROTO> = namesOf(ANCHOR_STATE_TO_PROTO);
export const DELIVERY_STATUS_NAMES: NamesOf<DeliveryStatus, typeof DELIVERY_STATUS_TO_PROTO> = namesOf(DELIVERY_STATUS_TO_PROTO);
export const DELIVERY_TRANSPORT_NAMES: NamesOf<DeliveryTransport, typeof DELIVERY_TRANSPORT_TO_PROTO> = namesOf(DELIVERY_TRANSPORT_TO_PROTO);
export const PULL_CLAIM_STATUS_NAMES: NamesOf<PullClaimStatus, typeof PULL_CLAIM_STATUS_TO_PROTO> = namesOf(PULL_CLAIM_STATUS_TO_PROTO);
export const REVIEW_STATE_NAMES: NamesOf<ReviewState, typeof REVIEW_STATE_TO_PROTO> = namesOf(REVIEW_STATE_TO_PROTO);
export const REVIEW_MODE_NAMES: NamesOf<ReviewMode, typeof REVIEW_MODE_TO_PROTO> = namesOf(REVIEW_MODE_TO_PROTO);
export const REVIEW_ACTION_NAMES: NamesOf<ReviewAction, typeof REVIEW_ACTION_TO_PROTO> = namesOf(REVIEW_ACTION_TO_PROTO);
export const EXPORT_FORMAT_NAMES: NamesOf<ExportFormat, typeof EXPORT_FORMAT_TO_PROTO> = namesOf(EXPORT_FORMAT_TO_PROTO);
export const PLAYER_ID_KIND_NAMES: NamesOf<PlayerIdKind, typeof PLAYER_ID_KIND_TO_PROTO> = namesOf(PLAYER_ID_KIND_TO_PROTO);
export const PLUGIN_CALL_OUTCOME_NAMES: NamesOf<PluginCallOutcome, typeof PLUGIN_CALL_OUTCOME_TO_PROTO> = namesOf(PLUGIN_CALL_OUTCOME_TO_PROTO);
