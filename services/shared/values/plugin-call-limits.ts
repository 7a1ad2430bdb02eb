/**
 * The bounds of a RecordPluginCalls request (the plugin activity card's feed), shared by the gateway that fills
 * it and the service that checks it: a full batch of calls at their longest fits the RPC's 64 KiB message limit
 * (MAX_RPC_MESSAGE_BYTES): 200 calls of at most about 300 bytes each.
 */

/** Calls per RecordPluginCalls request at most. */
export const MAX_PLUGIN_CALLS_PER_BATCH = 200;
/** Longest player id sent and stored; a longer one is cut (the owner sees enough to recognise its form). */
export const MAX_PLUGIN_CALL_PLAYER_ID_CHARS = 64;
