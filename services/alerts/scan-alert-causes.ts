import type { PrismaClient } from "../shared/adapters/db.js";
import { executeSql, runSql } from "../shared/adapters/sql/executor.js";
import { AUTO_DISABLE_AFTER_MS } from "../delivery/pipeline/endpoint-health.js";
import { ENDPOINT_FAILING_ALERT_AFTER_MS, endpointFailingAlert } from "./alert-kinds.js";
import { failingEndpointsSql, insertAlertsSql } from "./alert-store.js";

/** Causes one scan writes at most per kind (ALERT_SCAN_BATCH_ROWS); a full batch is followed by another scan at once. */
export const DEFAULT_ALERT_SCAN_BATCH_ROWS = 100;

/** What one scan wrote. */
export interface AlertScanResult {
  /** Endpoints failing for 24 hours found without their alert (at most the batch). */
  failing: number;
}

/**
 * The time causes of owner alerts, one bounded scan at `now` (the clock injected): endpoints whose run of failures
 * began between the auto-disable period and 24 hours ago and has no alert yet, at most `batchRows` (a range of the
 * callback_health failing_since index; see failingEndpointsSql), each written once by its cause key. Transition causes
 * (disabled, recovered) are written by the transaction that makes the transition, not here.
 */
export async function runAlertScan(deps: { db: PrismaClient; batchRows: number }, now: Date): Promise<AlertScanResult> {
  const from = new Date(now.getTime() - AUTO_DISABLE_AFTER_MS);
  const to = new Date(now.getTime() - ENDPOINT_FAILING_ALERT_AFTER_MS);
  const rows = await runSql<{
    endpoint_id: string;
    server_id: string;
    server_name: string;
    url: string | null;
    failing_since: Date;
    last_failure_reason: string | null;
  }>(deps.db, failingEndpointsSql(from, to, deps.batchRows));
  if (rows.length > 0) {
    await executeSql(
      deps.db,
      insertAlertsSql(
        rows.map((r) =>
          endpointFailingAlert({
            serverId: r.server_id,
            serverName: r.server_name,
            endpointId: r.endpoint_id,
            url: r.url,
            failingSince: r.failing_since,
            reason: r.last_failure_reason,
            at: now,
          }),
        ),
      ),
    );
  }
  return { failing: rows.length };
}
