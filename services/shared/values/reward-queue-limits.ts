/**
 * The bounds of the plugin-facing reward queue calls (docs/reward-queue.md), shared by the gateway that reads the
 * plugin's request and the referral service that checks it again: ListRewardQueue's page and online players,
 * AckRewardEntries' ids.
 */

/** Entries per list at most (`limit`). */
export const MAX_REWARD_QUEUE_PAGE = 100;
/** Entries per list when the plugin names no `limit`. */
export const DEFAULT_REWARD_QUEUE_PAGE = 50;
/** Players a list may name as online at most; a larger server lists in several calls, a slice of its players each. */
export const MAX_ONLINE_PLAYERS = 200;
/** Longest player name a list may name (longer than any game's name). */
export const MAX_ONLINE_NAME_CHARS = 64;
/** Ids per acknowledgement at most. */
export const MAX_ACK_IDS = 100;
/**
 * Bytes of commands and player fields one list answers at most: an entry holds up to 20 commands of 512 bytes, so a
 * page of large entries is cut short (the rest come on the next list) and the answer stays within the internal RPCs'
 * 64 KiB message limit. The first entry is always answered.
 */
export const REWARD_QUEUE_PAGE_BYTES = 48 * 1024;
