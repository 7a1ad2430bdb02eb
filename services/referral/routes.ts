import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ReferralService, type ApplyEventResponseSchema } from "../../gen/proto/referral/v1/referral_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { createApplyEventQueue, type ApplyEventBatchOptions, type ApplyEventResult } from "./apply-event.js";
import { toApplyEventCommand, toRecordClickCommand } from "./domain/commands.js";
import { recordClick } from "./record-click.js";
import type { AbuseRules } from "./domain/abuse-signals.js";
import { getFunnel, getLeaderboard, getReferral } from "./reports.js";
import { ANCHOR_STATE_TO_PROTO, REFERRAL_EVENT_NAMES } from "../shared/values/proto-names.js";

/**
 * The ReferralService routes: thin handlers that map proto -> command -> store
 * -> proto. Domain errors thrown below are mapped to Connect codes by the
 * server interceptor (services/shared/rpc/errors.ts is the one table).
 */
export function referralRoutes(
  deps: CoreDeps,
  opts: { applyEventBatch?: ApplyEventBatchOptions; abuseRules?: AbuseRules } = {},
): (router: ConnectRouter) => void {
  // Group commit: concurrent ApplyEvent calls share one transaction; a lone call is a batch of one (services/referral/apply-event.ts).
  const applyEvents = createApplyEventQueue(deps, opts.applyEventBatch, opts.abuseRules);
  return (router) => {
    router.service(ReferralService, {
      async recordClick(req) {
        const click = await recordClick(deps, toRecordClickCommand(req));
        return { token: click.token, clickId: click.clickId, redirectUrl: click.redirectUrl };
      },

      async applyEvent(req) {
        const command = toApplyEventCommand({ ...req, event: REFERRAL_EVENT_NAMES[req.event] ?? null });
        return toApplyEventResponse(await applyEvents.submit(command));
      },

      async getReferral(req) {
        const r = await getReferral(deps, req.referralId);
        return {
          referral: {
            id: r.id,
            serverId: r.serverId,
            refereeIdentity: r.refereeIdentity,
            referrerIdentity: r.referrerIdentity,
            state: ANCHOR_STATE_TO_PROTO[r.state],
            registeredAt: timestampFromDate(r.registeredAt),
            qualifiedAt: r.qualifiedAt ? timestampFromDate(r.qualifiedAt) : undefined,
            reversedAt: r.reversedAt ? timestampFromDate(r.reversedAt) : undefined,
            reversalReason: r.reversalReason ?? "",
            reversalReasonText: r.reversalReasonText ?? "",
            clawbackAt: r.clawbackAt ? timestampFromDate(r.clawbackAt) : undefined,
          },
        };
      },

      async getLeaderboard(req) {
        const rows = await getLeaderboard(deps, { serverId: req.serverId, period: req.period, limit: req.limit });
        return {
          entries: rows.map((r) => ({
            referrerIdentity: r.referrerIdentity,
            credits: BigInt(r.credits),
            reversed: BigInt(r.reversed),
            rank: r.rank,
            clawbacks: BigInt(r.clawbacks),
          })),
        };
      },

      async getFunnel(req) {
        const f = await getFunnel(deps, { serverId: req.serverId, period: req.period });
        return {
          clicks: BigInt(f.clicks),
          registered: BigInt(f.registered),
          qualified: BigInt(f.qualified),
          reversed: BigInt(f.reversed),
          clickToRegisterRate: f.clickToRegisterRate,
          registerToQualifyRate: f.registerToQualifyRate,
          reversalRate: f.reversalRate,
          clawbacks: BigInt(f.clawbacks),
          reversalsByReason: f.reversalsByReason.map((r) => ({ reason: r.reason, count: BigInt(r.count), clawbacks: BigInt(r.clawbacks) })),
        };
      },
    });
  };
}

/** Maps an ApplyEvent outcome to its oneof. */
function toApplyEventResponse(result: ApplyEventResult): MessageInitShape<typeof ApplyEventResponseSchema> {
  switch (result.kind) {
    case "applied":
      return {
        outcome: {
          case: "applied",
          value: { referralId: result.referralId, state: ANCHOR_STATE_TO_PROTO[result.state], advanced: result.advanced },
        },
      };
    case "duplicate":
      return { outcome: { case: "duplicate", value: {} } };
    case "first_touch_conflict":
      return { outcome: { case: "firstTouchConflict", value: {} } };
  }
}
