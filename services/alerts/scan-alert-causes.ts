import type { PrismaClient } from "../shared/adapters/db.js";
import { executeSql, runSql } from "../shared/adapters/sql/executor.js";
import { AUTO_DISABLE_AFTER_MS } from "../shared/values/endpoint-health-limits.js";
import { PLUGIN_ACTIVITY_MAX_AGE_MS } from "../plugin-activity/record-plugin-calls.js";
import {
  ENDPOINT_FAILING_ALERT_AFTER_MS,
  SECRET_OVERLAP_ALERT_BEFORE_MS,
  endpointFailingAlert,
  pluginSilentAlert,
  secretOverlapEndingAlert,
  type NewAlert,
} from "./alert-kinds.js";
import { endingOverlapsSql, failingEndpointsSql, insertAlertsSql, silentPluginsSql } from "./alert-store.js";

/** Causes one scan writes at most per kind (ALERT_SCAN_BATCH_ROWS); a full batch is followed by another scan at once. */
export const DEFAULT_ALERT_SCAN_BATCH_ROWS = 100;

/** ALERT_PLUGIN_SILENT_HOURS' default: a reward plugin not seen for this long gets an alert. */
export const DEFAULT_PLUGIN_SILENT_HOURS = 24;

/** What one scan wrote (each at most the batch). */
export interface AlertScanResult {
  /** Endpoints failing for 24 hours found without their alert. */
  failing: number;
  /** Old secrets whose rotation overlap ends within 24 hours. */
  overlaps: number;
  /** Servers whose reward plugin was not seen for the set time. */
  silentPlugins: number;
}

/** What a scan needs: the database, its batch, and how long a plugin may be silent. */
export interface AlertScanDeps {
  db: PrismaClient;
  batchRows: number;
  /** ALERT_PLUGIN_SILENT_HOURS. */
  pluginSilentHours?: number;
}

/**
 * The time causes of owner alerts, one bounded scan at `now` (the clock injected): endpoints whose run of failures
 * began between the auto-disable period and 24 hours ago and has no alert yet, at most `batchRows` (a range of the
 * callback_health failing_since index; see failingEndpointsSql), each written once by its cause key. Transition causes
 * (disabled, recovered) are written by the transaction that makes the transition, not here. Also old secrets whose
 * rotation overlap ends within 24 hours (endingOverlapsSql) and servers whose reward plugin's last call is older than
 * the set silence (silentPluginsSql), each at most `batchRows`.
 */
export async function runAlertScan(deps: AlertScanDeps, now: Date): Promise<AlertScanResult> {
  const from = new Date(now.getTime() - AUTO_DISABLE_AFTER_MS);
  const to = new Date(now.getTime() - ENDPOINT_FAILING_ALERT_AFTER_MS);
  const rows = await runSql<{
    endpoint_id: string;
    server_id: string;
    server_name: string;
    url: string | null;
    failing_since: Date;
    last_failure_reason: string | null;
    last_failed_delivery_id: string | null;
  }>(deps.db, failingEndpointsSql(from, to, deps.batchRows));
  await raise(
    deps.db,
    rows.map((r) =>
      endpointFailingAlert({
        serverId: r.server_id,
        serverName: r.server_name,
        endpointId: r.endpoint_id,
        url: r.url,
        failingSince: r.failing_since,
        reason: r.last_failure_reason,
        lastFailedDeliveryId: r.last_failed_delivery_id,
        at: now,
      }),
    ),
  );
  const overlaps = await runSql<{
    secret_id: string;
    server_id: string;
    server_name: string;
    purpose: string;
    kid: string;
    endpoint_id: string | null;
    expires_at: Date;
  }>(deps.db, endingOverlapsSql(now, new Date(now.getTime() + SECRET_OVERLAP_ALERT_BEFORE_MS), deps.batchRows));
  await raise(
    deps.db,
    overlaps.map((r) =>
      secretOverlapEndingAlert({
        serverId: r.server_id,
        serverName: r.server_name,
        secretId: r.secret_id,
        purpose: r.purpose,
        kid: r.kid,
        endpointId: r.endpoint_id,
        expiresAt: r.expires_at,
        at: now,
      }),
    ),
  );
  const silentHours = deps.pluginSilentHours ?? DEFAULT_PLUGIN_SILENT_HOURS;
  const silent = await runSql<{ server_id: string; server_name: string; last_at: Date }>(
    deps.db,
    silentPluginsSql(new Date(now.getTime() - PLUGIN_ACTIVITY_MAX_AGE_MS), new Date(now.getTime() - silentHours * 3_600_000), deps.batchRows),
  );
  await raise(
    deps.db,
    silent.map((r) => pluginSilentAlert({ serverId: r.server_id, serverName: r.server_name, lastAt: r.last_at, silentForHours: silentHours, at: now })),
  );
  return { failing: rows.length, overlaps: overlaps.length, silentPlugins: silent.length };
}

/** Writes a scan's alerts (a key already there is dropped). */
async function raise(db: PrismaClient, alerts: readonly NewAlert[]): Promise<void> {
  if (alerts.length > 0) await executeSql(db, insertAlertsSql(alerts));
}
