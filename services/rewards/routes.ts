import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import {
  GetRewardRulesResponseSchema,
  PreviewRewardsResponseSchema,
  PutRewardRulesResponseSchema,
  RewardEntrySchema,
  RewardRulesService,
  SkippedRewardSchema,
} from "../../gen/proto/rewards/v1/rewards_pb.js";
import { utcDay } from "../hearts/domain/streak.js";
import { requireServerId } from "../servers/server-exists.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { DomainError } from "../shared/rpc/errors.js";
import { CALLER_PRINCIPAL } from "../shared/rpc/interceptors.js";
import { parseRewardRules, REWARD_RULE_LIMITS, type RewardRules } from "./domain/reward-rules.js";
import { rewardsForVote } from "./domain/rewards-for-vote.js";
import { getPeriodStandings } from "./get-period-standings.js";
import { readRewardRules, saveRewardRules } from "./reward-rules-store.js";

/** The heart id a preview draws its lucky rewards from when the caller gives none. */
export const PREVIEW_HEART_ID = "00000000-0000-0000-0000-000000000000";
/** The draw seed of a preview of a server with no saved rules yet (its real seed is made at the first save). */
const PREVIEW_SEED = "preview";
/** Largest rules document accepted, in bytes (far above what the rules' own bounds allow). */
export const MAX_RULES_JSON_BYTES = 256 * 1024;

/** The text of a save whose base is not the current version: an older one (someone saved since), or one never saved. */
export function staleVersionText(base: number, current: number): string {
  if (base > current) return `base_version ${base} was never saved (the current version is ${current})`;
  return `the rules changed since version ${base} was read (now version ${current}); reload them and edit again`;
}

/** Parses an owner's rules document: the rules, or invalid_argument with every problem (never the document itself). */
function rulesFrom(json: string): RewardRules {
  if (Buffer.byteLength(json, "utf8") > MAX_RULES_JSON_BYTES) throw new DomainError("invalid_argument", `rules_json: over ${MAX_RULES_JSON_BYTES} bytes`);
  let input: unknown;
  try {
    input = JSON.parse(json);
  } catch {
    // Failure policy: a caller's broken JSON is their error, answered as such; the parser's message may quote the input.
    throw new DomainError("invalid_argument", "rules_json: not valid JSON");
  }
  const parsed = parseRewardRules(input, REWARD_RULE_LIMITS);
  if (!parsed.ok) throw new DomainError("invalid_argument", parsed.errors.join("; "));
  return parsed.rules;
}

/** A preview's count: at least 1 (the vote itself counts). */
function countOf(value: number, field: string): number {
  if (value < 1) throw new DomainError("invalid_argument", `${field}: must be at least 1 (the previewed vote counts)`);
  return value;
}

/**
 * Registers RewardRulesService (issue 31): a server's reward rules, validated (services/rewards/domain/reward-rules.ts),
 * saved as versions, and previewed. Access (services/access/rpc-access.ts): admin tokens save, read tokens read and
 * preview, on any server; a server's owner all three on their own servers only.
 */
export function rewardRulesRoutes(deps: CoreDeps): (router: ConnectRouter) => void {
  return (router) => {
    router.service(RewardRulesService, {
      async getRewardRules(req) {
        const serverId = await requireServerId(deps, req.serverId);
        const saved = await readRewardRules(deps.prisma, serverId);
        if (saved === null) return create(GetRewardRulesResponseSchema, { version: 0, rulesJson: "{}" });
        return create(GetRewardRulesResponseSchema, {
          version: saved.version,
          rulesJson: JSON.stringify(saved.rules),
          drawSeed: saved.drawSeed,
          savedBy: saved.savedBy,
          savedAt: timestampFromDate(saved.savedAt),
        });
      },
      async putRewardRules(req, ctx) {
        const serverId = await requireServerId(deps, req.serverId);
        if (req.baseVersion < 0) throw new DomainError("invalid_argument", "base_version: must be 0 or more");
        const rules = rulesFrom(req.rulesJson);
        const version = await saveRewardRules(deps.prisma, {
          serverId,
          rules,
          baseVersion: req.baseVersion,
          savedBy: ctx.values.get(CALLER_PRINCIPAL),
          at: deps.now(),
        });
        if (version === null) {
          const current = (await readRewardRules(deps.prisma, serverId))?.version ?? 0;
          throw new DomainError("failed_precondition", staleVersionText(req.baseVersion, current));
        }
        deps.log.info({ serverId, version }, "reward rules saved");
        return create(PutRewardRulesResponseSchema, { version });
      },
      async previewRewards(req) {
        const serverId = await requireServerId(deps, req.serverId);
        const saved = await readRewardRules(deps.prisma, serverId);
        const rules = req.rulesJson.trim() !== "" ? rulesFrom(req.rulesJson) : rulesFrom(saved === null ? "{}" : JSON.stringify(saved.rules));
        const countedAt = req.countedAt ? timestampDate(req.countedAt) : deps.now();
        const streakDays = Math.max(1, req.streakDays);
        const optional = (value: string) => (value.trim() === "" ? undefined : value.trim());
        const ids = Object.fromEntries(
          Object.entries({
            player: optional(req.player),
            steam_id: optional(req.steamId),
            discord_id: optional(req.discordId),
            minecraft_uuid: optional(req.minecraftUuid),
            account_id: optional(req.accountId),
          }).filter(([, v]) => v !== undefined),
        );
        const result = rewardsForVote(
          rules,
          {
            heartId: optional(req.heartId) ?? PREVIEW_HEART_ID,
            countedAt,
            ids,
            totals: { all: countOf(req.total, "total"), month: countOf(req.monthTotal, "month_total"), week: countOf(req.weekTotal, "week_total") },
            streak: { streak: { lastDay: utcDay(countedAt), days: streakDays }, extended: req.streakExtended, lostDays: 0 },
          },
          saved?.drawSeed ?? PREVIEW_SEED,
        );
        return create(PreviewRewardsResponseSchema, {
          weight: result.weight,
          entries: result.entries.map((e) => create(RewardEntrySchema, { key: e.key, reason: e.reason, commands: e.commands, onlineOnly: e.onlineOnly })),
          skipped: result.skipped.map((s) => create(SkippedRewardSchema, s)),
        });
      },
      getPeriodStandings: (req) => getPeriodStandings(deps, req),
    });
  };
}
