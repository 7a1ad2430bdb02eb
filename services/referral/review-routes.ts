import type { ConnectRouter } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ReferralReviewService, type ReviewedReferralSchema } from "../../gen/proto/referral/v1/referral_review_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError } from "../shared/rpc/errors.js";
import { choiceText } from "../shared/values/contract.js";
import {
  ANCHOR_STATE_NAMES,
  ANCHOR_STATE_TO_PROTO,
  EXPORT_FORMAT_NAMES,
  EXPORT_FORMAT_TO_PROTO,
  REVIEW_ACTION_NAMES,
  REVIEW_ACTION_TO_PROTO,
  REVIEW_MODE_NAMES,
  REVIEW_MODE_TO_PROTO,
  REVIEW_STATE_NAMES,
  REVIEW_STATE_TO_PROTO,
} from "../shared/values/proto-names.js";
import { exportReferrals, getReferralDetail, listReferrals, type ReferralFilter, type ReviewedReferral } from "./list-referrals.js";
import { getReviewMode, reviewReferral, setReviewMode } from "./review-referral.js";

/** The filter fields ListReferrals and ExportReferrals share, as the proto carries them. */
interface FilterFields {
  serverId: string;
  state: number;
  review: number;
  flaggedOnly: boolean;
  referrerIdentity: string;
}

/**
 * The ReferralReviewService routes (proto -> use case -> proto): the owner's referral list, detail,
 * review, export and the per-server anti-abuse mode. Access rules: services/access/rpc-access.ts.
 */
export function referralReviewRoutes(deps: CoreDeps): (router: ConnectRouter) => void {
  return (router) => {
    router.service(ReferralReviewService, {
      async listReferrals(req) {
        const page = await listReferrals(deps, { filter: toFilter(req), pageSize: req.pageSize, pageToken: req.pageToken });
        return { referrals: page.referrals.map(toProto), nextPageToken: page.nextPageToken };
      },
      async getReferralDetail(req) {
        const detail = await getReferralDetail(deps, req.referralId);
        return {
          referral: toProto(detail.referral),
          events: detail.events.map((e) => ({ type: e.type, serverEventId: e.serverEventId, receivedAt: timestampFromDate(e.receivedAt), outcome: e.outcome })),
        };
      },
      async reviewReferral(req) {
        const action = REVIEW_ACTION_NAMES[req.action];
        if (action === undefined) throw new DomainError("invalid_argument", choiceText("action", Object.keys(REVIEW_ACTION_TO_PROTO)));
        const result = await reviewReferral(deps, { referralId: req.referralId, action });
        return { referral: toProto(result.referral), changed: result.changed };
      },
      async exportReferrals(req) {
        const format = EXPORT_FORMAT_NAMES[req.format];
        if (format === undefined) throw new DomainError("invalid_argument", choiceText("format", Object.keys(EXPORT_FORMAT_TO_PROTO)));
        return exportReferrals(deps, { filter: toFilter(req), format });
      },
      async getReferralReviewMode(req) {
        return { mode: REVIEW_MODE_TO_PROTO[await getReviewMode(deps, req.serverId)] };
      },
      async setReferralReviewMode(req) {
        const mode = REVIEW_MODE_NAMES[req.mode];
        if (mode === undefined) throw new DomainError("invalid_argument", choiceText("mode", Object.keys(REVIEW_MODE_TO_PROTO)));
        return { mode: REVIEW_MODE_TO_PROTO[await setReviewMode(deps, { serverId: req.serverId, mode })] };
      },
    });
  };
}

/** The proto filter fields -> the use case's filter (UNSPECIFIED enums: no filter). */
function toFilter(req: FilterFields): ReferralFilter {
  return {
    serverId: req.serverId,
    state: ANCHOR_STATE_NAMES[req.state as keyof typeof ANCHOR_STATE_NAMES] ?? "",
    review: REVIEW_STATE_NAMES[req.review as keyof typeof REVIEW_STATE_NAMES] ?? "",
    flaggedOnly: req.flaggedOnly,
    referrerIdentity: req.referrerIdentity,
  };
}

function toProto(r: ReviewedReferral): MessageInitShape<typeof ReviewedReferralSchema> {
  return {
    id: r.id,
    serverId: r.serverId,
    referrerIdentity: r.referrerIdentity,
    refereeIdentity: r.refereeIdentity,
    state: ANCHOR_STATE_TO_PROTO[r.state],
    registeredAt: timestampFromDate(r.registeredAt),
    qualifiedAt: r.qualifiedAt ? timestampFromDate(r.qualifiedAt) : undefined,
    reversedAt: r.reversedAt ? timestampFromDate(r.reversedAt) : undefined,
    review: REVIEW_STATE_TO_PROTO[r.review],
    reviewedAt: r.reviewedAt ? timestampFromDate(r.reviewedAt) : undefined,
    signals: r.signals.map((s) => ({ code: s.code, detailsJson: JSON.stringify(s.details) })),
    counted: r.counted,
  };
}
