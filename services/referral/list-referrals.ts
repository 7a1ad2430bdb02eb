import { Prisma } from "../../gen/prisma/client.js";
import { isUuid } from "../shared/values/ids.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { DomainError } from "../shared/rpc/errors.js";
import { notNegativeText } from "../shared/values/contract.js";
import { boundField } from "../shared/values/field-rules.js";
import { requireServerId } from "../servers/server-exists.js";
import { decodePageToken, encodePageToken } from "../hearts/list-hearts.js";
import { COUNTED_REVIEWS, type ReviewState } from "./domain/abuse-signals.js";
import type { AnchorState } from "./domain/transitions.js";

/** Referrals per page when the caller gives no page size, and the most one page may hold. */
export const DEFAULT_REFERRALS_PAGE = 50;
export const MAX_REFERRALS_PAGE = 200;
/** The most rows one export holds; beyond it the export says `truncated` (narrow the filter, e.g. by referrer). */
export const MAX_EXPORT_ROWS = 10_000;

/** Bounds that stand for "no bound": later than any stored time, above any id. */
const LATEST = new Date(Date.UTC(9999, 0, 1));
const LAST_UUID = "ffffffff-ffff-ffff-ffff-ffffffffffff";

/** A referral with its anti-abuse record, as the review RPCs show it. */
export interface ReviewedReferral {
  id: string;
  serverId: string;
  referrerIdentity: string;
  refereeIdentity: string;
  state: AnchorState;
  registeredAt: Date;
  qualifiedAt: Date | null;
  reversedAt: Date | null;
  review: ReviewState;
  reviewedAt: Date | null;
  /** Signal codes in table order, each with what was seen. */
  signals: Array<{ code: string; details: Record<string, unknown> }>;
  /** Its credit counts on the leaderboard now: qualified, not reversed, unflagged or approved. */
  counted: boolean;
  /** It has a credit that is not reversed (counted once its review allows). */
  liveCredit: boolean;
}

/** Which referrals of a server: "" (or false) for no filter. */
export interface ReferralFilter {
  serverId: string;
  state: "" | AnchorState;
  review: "" | ReviewState;
  flaggedOnly: boolean;
  referrerIdentity: string;
}

interface Row {
  id: string;
  server_id: string;
  referrer_identity: string;
  referee_identity: string;
  state: AnchorState;
  registered_at: Date;
  qualified_at: Date | null;
  reversed_at: Date | null;
  review: ReviewState;
  reviewed_at: Date | null;
  signals: string[];
  signal_details: Record<string, Record<string, unknown>> | null;
  counted: boolean;
  live_credit: boolean;
}

/** The select of one reviewed referral (shared by list, export, detail and review). */
async function selectReferrals(
  deps: CoreDeps,
  where: { serverId?: string; id?: string; filter?: ReferralFilter; before?: { at: Date; id: string }; limit: number },
): Promise<ReviewedReferral[]> {
  const f = where.filter;
  const before = where.before ?? { at: LATEST, id: LAST_UUID };
  const rows = await runSql<Row>(
    deps.prisma,
    Prisma.sql`
      SELECT r.id::text AS id, r.server_id::text AS server_id, r.referrer_identity, r.referee_identity, r.state::text AS state,
             r.registered_at, r.qualified_at, r.reversed_at, r.review::text AS review, r.reviewed_at,
             coalesce(r.signals, '{}') AS signals, r.signal_details,
             (c.referral_id IS NOT NULL AND c.reversed_at IS NULL AND r.review::text = ANY(${COUNTED_REVIEWS}::text[])) AS counted,
             (c.referral_id IS NOT NULL AND c.reversed_at IS NULL) AS live_credit
      FROM referrals r LEFT JOIN referral_credits c ON c.referral_id = r.id
      WHERE (${where.id ?? null}::uuid IS NULL OR r.id = ${where.id ?? null}::uuid)
        AND (${f?.serverId ?? null}::uuid IS NULL OR r.server_id = ${f?.serverId ?? null}::uuid)
        AND (${f?.state ?? ""} = '' OR r.state::text = ${f?.state ?? ""})
        AND (${f?.review ?? ""} = '' OR r.review::text = ${f?.review ?? ""})
        AND (NOT ${f?.flaggedOnly ?? false} OR cardinality(r.signals) > 0)
        AND (${f?.referrerIdentity ?? ""} = '' OR r.referrer_identity = ${f?.referrerIdentity ?? ""})
        AND (r.registered_at, r.id) < (${before.at}::timestamptz, ${before.id}::uuid)
      ORDER BY r.registered_at DESC, r.id DESC
      LIMIT ${where.limit}`,
  );
  return rows.map((r) => ({
    id: r.id,
    serverId: r.server_id,
    referrerIdentity: r.referrer_identity,
    refereeIdentity: r.referee_identity,
    state: r.state,
    registeredAt: r.registered_at,
    qualifiedAt: r.qualified_at,
    reversedAt: r.reversed_at,
    review: r.review,
    reviewedAt: r.reviewed_at,
    signals: r.signals.map((code) => ({ code, details: r.signal_details?.[code] ?? {} })),
    counted: r.counted,
    liveCredit: r.live_credit,
  }));
}

/** Checks a filter: the server exists (404 otherwise), the referrer is within its field bound. */
async function checkedFilter(deps: CoreDeps, filter: ReferralFilter): Promise<ReferralFilter> {
  const serverId = await requireServerId(deps, filter.serverId);
  const referrerIdentity = filter.referrerIdentity.trim() === "" ? "" : boundField("referrer_identity", filter.referrerIdentity.trim());
  return { ...filter, serverId, referrerIdentity };
}

/**
 * ListReferrals: one server's referrals, newest registration first, filtered by state, review,
 * flagged and referrer. Keyset pagination on (registered_at, id) with the hearts list's opaque
 * page token, so referrals registered while an owner pages are neither repeated nor skipped.
 */
export async function listReferrals(
  deps: CoreDeps,
  input: { filter: ReferralFilter; pageSize: number; pageToken: string },
): Promise<{ referrals: ReviewedReferral[]; nextPageToken: string }> {
  const filter = await checkedFilter(deps, input.filter);
  if (input.pageSize < 0) throw new DomainError("invalid_argument", notNegativeText("page_size"));
  const pageSize = Math.min(input.pageSize === 0 ? DEFAULT_REFERRALS_PAGE : input.pageSize, MAX_REFERRALS_PAGE);
  const before = input.pageToken === "" ? undefined : decodePageToken(input.pageToken);
  const rows = await selectReferrals(deps, { filter, limit: pageSize + 1, ...(before ? { before } : {}) });
  const page = rows.slice(0, pageSize);
  const last = page.at(-1);
  return { referrals: page, nextPageToken: rows.length > pageSize && last ? encodePageToken({ at: last.registeredAt, id: last.id }) : "" };
}

/** One referral with its anti-abuse record; 404 `referral not found`. */
export async function getReviewedReferral(deps: CoreDeps, rawId: string): Promise<ReviewedReferral> {
  const id = rawId.trim();
  const [row] = isUuid(id) ? await selectReferrals(deps, { id, limit: 1 }) : [];
  if (!row) throw new DomainError("not_found", "referral not found");
  return row;
}

/** One event applied to a referral. */
export interface ReferralEventRecord {
  type: string;
  serverEventId: string;
  receivedAt: Date;
  outcome: string;
}

/** GetReferralDetail: the referral and every event applied to it, oldest first. */
export async function getReferralDetail(deps: CoreDeps, rawId: string): Promise<{ referral: ReviewedReferral; events: ReferralEventRecord[] }> {
  const referral = await getReviewedReferral(deps, rawId);
  const events = await deps.prisma.referralEvent.findMany({
    where: { referralId: referral.id },
    orderBy: [{ receivedAt: "asc" }, { id: "asc" }],
    select: { type: true, serverEventId: true, receivedAt: true, outcome: true },
  });
  return { referral, events };
}

/** An export's body. */
export interface ReferralExport {
  contentType: string;
  body: string;
  rows: number;
  truncated: boolean;
}

/** The columns of an export, in order (CSV header and JSON keys alike). */
export const EXPORT_COLUMNS = [
  "id",
  "referrer_identity",
  "referee_identity",
  "state",
  "registered_at",
  "qualified_at",
  "reversed_at",
  "review",
  "reviewed_at",
  "counted",
  "signals",
  "signal_details",
] as const;

/**
 * ExportReferrals: the filtered referrals (newest first) as CSV (RFC 4180, a header row, signals
 * space-separated, details as JSON; a cell starting with = + - @ gets a leading ' so spreadsheets do
 * not run it as a formula) or JSON (an array of objects). Bounded, not streamed: at most
 * MAX_EXPORT_ROWS rows, with `truncated` set when more matched.
 */
export async function exportReferrals(deps: CoreDeps, input: { filter: ReferralFilter; format: "csv" | "json" }): Promise<ReferralExport> {
  const filter = await checkedFilter(deps, input.filter);
  const rows = await selectReferrals(deps, { filter, limit: MAX_EXPORT_ROWS + 1 });
  const kept = rows.slice(0, MAX_EXPORT_ROWS);
  const records = kept.map((r) => ({
    id: r.id,
    referrer_identity: r.referrerIdentity,
    referee_identity: r.refereeIdentity,
    state: r.state,
    registered_at: r.registeredAt.toISOString(),
    qualified_at: r.qualifiedAt?.toISOString() ?? null,
    reversed_at: r.reversedAt?.toISOString() ?? null,
    review: r.review,
    reviewed_at: r.reviewedAt?.toISOString() ?? null,
    counted: r.counted,
    signals: r.signals.map((s) => s.code),
    signal_details: Object.fromEntries(r.signals.map((s) => [s.code, s.details])),
  }));
  const truncated = rows.length > MAX_EXPORT_ROWS;
  if (input.format === "json") return { contentType: "application/json", body: JSON.stringify(records), rows: kept.length, truncated };
  const lines = [EXPORT_COLUMNS.join(",")];
  for (const rec of records) {
    lines.push(
      EXPORT_COLUMNS.map((column) => {
        const value = rec[column];
        if (column === "signals") return csvCell((value as string[]).join(" "));
        if (column === "signal_details") return csvCell(JSON.stringify(value));
        return csvCell(value === null ? "" : String(value));
      }).join(","),
    );
  }
  return { contentType: "text/csv; charset=utf-8", body: `${lines.join("\r\n")}\r\n`, rows: kept.length, truncated };
}

/** One CSV cell: quoted when it holds a comma, quote or line break; formula-looking text defused. */
export function csvCell(text: string): string {
  const safe = /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}
