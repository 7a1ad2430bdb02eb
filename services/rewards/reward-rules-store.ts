import { randomBytes } from "node:crypto";
import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import type { Logger } from "../shared/runtime/log.js";
import { parseRewardRules, REWARD_RULE_LIMITS, type RewardRules } from "./domain/reward-rules.js";

/** A saved version of a server's reward rules. */
export interface SavedRewardRules {
  version: number;
  /** The rules as saved (their JSON form; parse with parseRewardRules). */
  rules: unknown;
  drawSeed: string;
  savedBy: string;
  savedAt: Date;
}

/**
 * THE reader of a server's current reward rules: the highest saved version, or null when none was saved.
 */
export async function readRewardRules(prisma: PrismaClient, serverId: string): Promise<SavedRewardRules | null> {
  return (await readRewardRulesOf(prisma, [serverId])).get(serverId.toLowerCase()) ?? null;
}

/**
 * The current reward rules of each of `serverIds` (readRewardRules for many servers in one statement: the delivery
 * consumer reads a batch's servers at once), keyed by server id in lower case (as PostgreSQL writes a uuid). A server
 * without saved rules is absent from the map.
 */
export async function readRewardRulesOf(prisma: PrismaClient, serverIds: readonly string[]): Promise<Map<string, SavedRewardRules>> {
  if (serverIds.length === 0) return new Map();
  // Bounded: per server asked, one entry of the primary key (server_id, version), read from its high end.
  const rows = await runSql<{ server_id: string; version: number; rules: unknown; draw_seed: string; saved_by: string; created_at: Date }>(
    prisma,
    Prisma.sql`SELECT s.id AS server_id, r.version, r.rules, r.draw_seed, r.saved_by, r.created_at
               FROM unnest(${[...new Set(serverIds)]}::uuid[]) AS s(id)
               CROSS JOIN LATERAL (SELECT version, rules, draw_seed, saved_by, created_at FROM reward_rule_versions
                                   WHERE server_id = s.id ORDER BY version DESC LIMIT 1) r`,
  );
  return new Map(
    rows.map((row) => [row.server_id, { version: row.version, rules: row.rules, drawSeed: row.draw_seed, savedBy: row.saved_by, savedAt: row.created_at }]),
  );
}

/** The JSON form rules are saved in: the owner's shape, with instants as ISO strings. */
function rewardRulesJson(rules: RewardRules): string {
  return JSON.stringify(rules);
}

/**
 * THE writer of reward_rule_versions: saves `rules` (validated by the caller) as version `baseVersion + 1`, only if
 * `baseVersion` is still the current version (0: none saved). The draw seed is carried from the current version, or
 * made (128 random bits, hex) at the first save. Returns the new version, or null when the base is stale (another
 * save came first, or two saves raced for the same version: the primary key lets one in).
 */
export async function saveRewardRules(
  prisma: PrismaClient,
  s: { serverId: string; rules: RewardRules; baseVersion: number; savedBy: string; at: Date },
): Promise<number | null> {
  // Bounded: one entry of the primary key read (the current version), one row inserted.
  const [row] = await runSql<{ version: number }>(
    prisma,
    Prisma.sql`
      WITH cur AS (SELECT version, draw_seed FROM reward_rule_versions WHERE server_id = ${s.serverId}::uuid ORDER BY version DESC LIMIT 1)
      INSERT INTO reward_rule_versions (server_id, version, rules, draw_seed, saved_by, created_at)
      SELECT ${s.serverId}::uuid, ${s.baseVersion + 1}::int, ${rewardRulesJson(s.rules)}::jsonb,
             COALESCE((SELECT draw_seed FROM cur), ${randomBytes(16).toString("hex")}), ${s.savedBy}, ${s.at}::timestamptz
      WHERE COALESCE((SELECT version FROM cur), 0) = ${s.baseVersion}::int
      ON CONFLICT (server_id, version) DO NOTHING
      RETURNING version`,
  );
  return row?.version ?? null;
}

/** A server's current rules, parsed and ready to give, with their version and draw seed. */
export interface CurrentRewardRules {
  rules: RewardRules;
  version: number;
  drawSeed: string;
}

/**
 * The current rules of each of `serverIds` that has saved rules (readRewardRulesOf), parsed, keyed by server id in lower
 * case. Rules saved valid that no longer parse are left out and logged (counts only): they cannot give anything.
 */
export async function readCurrentRewardRules(prisma: PrismaClient, serverIds: readonly string[], log: Logger): Promise<Map<string, CurrentRewardRules>> {
  const current = new Map<string, CurrentRewardRules>();
  for (const [serverId, saved] of await readRewardRulesOf(prisma, serverIds)) {
    const parsed = parseRewardRules(saved.rules, REWARD_RULE_LIMITS);
    if (!parsed.ok) {
      // Failure policy: skip the server's rewards - rules saved valid that no longer parse cannot give anything, and retrying would stop the partition's deliveries.
      log.error({ serverId, version: saved.version, problems: parsed.errors.length }, "saved reward rules do not parse; their rewards are not queued");
      continue;
    }
    current.set(serverId, { rules: parsed.rules, version: saved.version, drawSeed: saved.drawSeed });
  }
  return current;
}
