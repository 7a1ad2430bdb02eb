/**
 * Owner alerts' causes (docs/owner-alerts.md), pure: each kind, the key of one occurrence of its cause (an alert row
 * per key, so a cause fires once), and its title, text and dashboard link. The text names the server, the endpoint's
 * host and the reason the endpoint's health recorded; never a secret (the stored URL's path and query, which can carry
 * a token, are left out) and never a voter's address.
 */

/** The kinds of owner alert. */
export const ALERT_KINDS = [
  "endpoint_failing",
  "endpoint_disabled",
  "endpoint_recovered",
  "secret_overlap_ending",
  "plugin_silent",
  "votifier_failing",
] as const;
export type AlertKind = (typeof ALERT_KINDS)[number];

/** The kinds a recovery ends (a recovered alert follows one of these, once). */
export const RECOVERABLE_KINDS: readonly AlertKind[] = ["endpoint_failing", "endpoint_disabled"];

/** An endpoint failing this long gets the "failing" alert (before AUTO_DISABLE_AFTER_MS disables it). */
export const ENDPOINT_FAILING_ALERT_AFTER_MS = 24 * 60 * 60 * 1000;

/** One alert as written (alert-store.ts's insertAlertsSql); its owner is the server's. */
export interface NewAlert {
  server_id: string;
  kind: AlertKind;
  cause_key: string;
  endpoint_id: string | null;
  title: string;
  detail: string;
  link: string;
  at: string;
}

/**
 * The dashboard page of one endpoint's settings and deliveries (the gateway serves the dashboard at /dashboard); with
 * `deliveryId`, that delivery's attempts opened on it.
 */
export function endpointLink(serverId: string, endpointId: string, deliveryId: string | null = null): string {
  const delivery = deliveryId === null ? "" : `&delivery=${encodeURIComponent(deliveryId)}`;
  return `/dashboard/?server=${encodeURIComponent(serverId)}&endpoint=${encodeURIComponent(endpointId)}${delivery}#deliveries`;
}

/** The host of an endpoint URL, for alert text: the path and query may carry a receiver's token. */
export function hostOf(url: string | null): string {
  if (url === null) return "(no URL)";
  try {
    return new URL(url).host;
  } catch {
    // Failure policy: an unparsable stored URL is named generically rather than echoed (it may hold a token).
    return "(unparsable URL)";
  }
}

/**
 * The "failing for 24 hours" alert of one run of failures (its key: the endpoint and the run's start); its text and
 * link name the endpoint's last failed delivery when it is still stored (null: the endpoint's page only).
 */
export function endpointFailingAlert(a: {
  serverId: string;
  serverName: string;
  endpointId: string;
  url: string | null;
  failingSince: Date;
  reason: string | null;
  lastFailedDeliveryId: string | null;
  at: Date;
}): NewAlert {
  const lastFailed = a.lastFailedDeliveryId === null ? "" : `. Last failed delivery: ${a.lastFailedDeliveryId}.`;
  return {
    server_id: a.serverId,
    kind: "endpoint_failing",
    cause_key: `endpoint_failing:${a.endpointId}:${a.failingSince.toISOString()}`,
    endpoint_id: a.endpointId,
    title: `${a.serverName}: callback endpoint failing for 24 hours`,
    detail: `Every callback to ${hostOf(a.url)} has failed since ${a.failingSince.toISOString()}; it is disabled after 5 days of failures. Last error: ${a.reason ?? "attempt failed"}${lastFailed}`,
    link: endpointLink(a.serverId, a.endpointId, a.lastFailedDeliveryId),
    at: a.at.toISOString(),
  };
}

/** The "disabled" alert of one disable (its key: the endpoint and the disable's time). */
export function endpointDisabledAlert(a: { serverId: string; serverName: string; endpointId: string; url: string | null; reason: string; at: Date }): NewAlert {
  return {
    server_id: a.serverId,
    kind: "endpoint_disabled",
    cause_key: `endpoint_disabled:${a.endpointId}:${a.at.toISOString()}`,
    endpoint_id: a.endpointId,
    title: `${a.serverName}: callback endpoint disabled`,
    detail: `Callbacks to ${hostOf(a.url)} are disabled: ${a.reason}. Deliveries wait until it is enabled again.`,
    link: endpointLink(a.serverId, a.endpointId),
    at: a.at.toISOString(),
  };
}

/** The recovered alert's title and text (the statement that writes it fills in the time). */
export const RECOVERED_TITLE_SUFFIX = ": callback endpoint recovered";
export const RECOVERED_DETAIL = "A callback to this endpoint succeeded again; the earlier alert about it is resolved.";

/** The key of the recovered alert that follows one failing or disabled alert. */
export const RECOVERED_KEY_PREFIX = "endpoint_recovered:";

/** A rotation overlap that ends within this is "ending soon". */
export const SECRET_OVERLAP_ALERT_BEFORE_MS = 24 * 60 * 60 * 1000;

/** Where a secret of each purpose is set on the dashboard. */
function secretLink(serverId: string, purpose: string, endpointId: string | null): string {
  if (purpose === "callback" && endpointId !== null) return endpointLink(serverId, endpointId);
  return `/dashboard/?server=${encodeURIComponent(serverId)}#integration`;
}

/** The "rotation overlap ends soon" alert of one old secret (its key: the secret and its overlap's end). */
export function secretOverlapEndingAlert(a: {
  serverId: string;
  serverName: string;
  secretId: string;
  purpose: string;
  kid: string;
  endpointId: string | null;
  expiresAt: Date;
  at: Date;
}): NewAlert {
  return {
    server_id: a.serverId,
    kind: "secret_overlap_ending",
    cause_key: `secret_overlap_ending:${a.secretId}:${a.expiresAt.toISOString()}`,
    endpoint_id: a.endpointId,
    title: `${a.serverName}: the old ${a.purpose} secret stops working soon`,
    detail: `The ${a.purpose} secret ${a.kid} was rotated; its overlap ends at ${a.expiresAt.toISOString()}. Anything still using it must switch to the new secret before then.`,
    link: secretLink(a.serverId, a.purpose, a.endpointId),
    at: a.at.toISOString(),
  };
}

/** The "reward plugin not seen" alert of one silence (its key: the server and its plugin's last call). */
export function pluginSilentAlert(a: { serverId: string; serverName: string; lastAt: Date; silentForHours: number; at: Date }): NewAlert {
  return {
    server_id: a.serverId,
    kind: "plugin_silent",
    cause_key: `plugin_silent:${a.serverId}:${a.lastAt.toISOString()}`,
    endpoint_id: null,
    title: `${a.serverName}: reward plugin not seen for ${a.silentForHours} hours`,
    detail: `The reward plugin's last check or claim was at ${a.lastAt.toISOString()}. Is the game server up, and the plugin's key still right?`,
    link: `/dashboard/?server=${encodeURIComponent(a.serverId)}#integration`,
    at: a.at.toISOString(),
  };
}

/**
 * The "Votifier listener failing" alert: a vote to the server's Votifier listener failed for good (after its retry
 * schedule). Its key: the server and the UTC day, so an outage that fails many votes fires once a day, not per vote.
 */
export function votifierFailingAlert(a: {
  serverId: string;
  serverName: string;
  deliveryId: string;
  target: string;
  attempts: number;
  error: string;
  at: Date;
}): NewAlert {
  return {
    server_id: a.serverId,
    kind: "votifier_failing",
    cause_key: `votifier_failing:${a.serverId}:${a.at.toISOString().slice(0, 10)}`,
    endpoint_id: null,
    title: `${a.serverName}: Votifier listener failing`,
    detail: `A vote to the Votifier listener at ${hostOf(a.target.replace(/^votifier:/, "tcp:"))} failed for good after ${a.attempts} attempts: ${a.error}`,
    link: `/dashboard/?server=${encodeURIComponent(a.serverId)}&delivery=${encodeURIComponent(a.deliveryId)}#deliveries`,
    at: a.at.toISOString(),
  };
}
