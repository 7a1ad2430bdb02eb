/**
 * How long a callback endpoint may fail before the service acts, one home for the delivery pipeline (which disables
 * it: services/delivery/pipeline/endpoint-health.ts) and owner alerts (which warn before that).
 */

/** A callback endpoint whose every attempt failed for this long is disabled (besides a 410). */
export const AUTO_DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;
