import type { DiscordAnswer, DiscordRest } from "../shared/adapters/discord-rest.js";
import { DiscordErrorCode } from "../shared/adapters/discord-rest.js";
import type { EnvReader } from "../shared/runtime/config.js";
import type { Logger } from "../shared/runtime/log.js";
import { createPassLoop, type PassLoop } from "../shared/runtime/pass-loop.js";
import type { SecretBox } from "../shared/runtime/secrets.js";
import { decideVoterRoleStep, retryVoterRoleStep } from "./domain/voter-role-step.js";
import { claimDueGrants, deleteLapsedGrant, recordVoterRoleOutcome, rescheduleGrant, type DueGrant } from "./voter-role-store.js";

/** The role job's settings (VOTER_ROLE_*; README's settings table). */
export interface VoterRoleJobSettings {
  /** VOTER_ROLE_INTERVAL_SECONDS (default 15): the wait between passes that found less than a batch. */
  intervalSeconds: number;
  /** VOTER_ROLE_BATCH_ROWS (default 50): grants one pass claims at most. */
  batchRows: number;
}

/** Reads the role job's settings, each bounded; problems are reported with the process's others. */
export function readVoterRoleJobSettings(r: EnvReader): VoterRoleJobSettings {
  return {
    intervalSeconds: r.int("VOTER_ROLE_INTERVAL_SECONDS", 15, { min: 1, max: 3_600 }),
    batchRows: r.int("VOTER_ROLE_BATCH_ROWS", 50, { min: 1, max: 1_000 }),
  };
}

/** The longest one Discord call may wait for a rate limit inside a pass; past it the grant is rescheduled at Discord's time. */
const VOTER_ROLE_MAX_WAIT_MS = 5_000;
/** One call's longest time: its wait plus the client's timeout. */
const VOTER_ROLE_CALL_MAX_MS = VOTER_ROLE_MAX_WAIT_MS + 10_000;

/** What a pass needs. */
export interface VoterRolePassDeps {
  db: object;
  discord: DiscordRest;
  secretBox: SecretBox;
  batchRows: number;
  log: Logger;
}

/** What one pass did, in counts. */
export interface VoterRolePassResult {
  claimed: number;
  added: number;
  removed: number;
  failed: number;
}

/**
 * One pass at `now`: claims at most `batchRows` due grants (leased for a minute plus the longest their calls can take one
 * after another), and for each (domain/voter-role-step.ts) adds the role through the Discord client (Add Guild Member
 * Role) and looks again when it lapses, or removes it (Remove Guild Member Role) and deletes the grant. A failure is
 * recorded on the server's settings (shown on the dashboard) and retried later; a rate limit reschedules the grant
 * at Discord's time. Neither the bot token nor the voter's Discord id reaches a log line or the recorded error.
 */
export async function runVoterRolePass(deps: VoterRolePassDeps, now: Date): Promise<VoterRolePassResult> {
  const leaseUntil = new Date(now.getTime() + 60_000 + deps.batchRows * VOTER_ROLE_CALL_MAX_MS);
  const rows = await claimDueGrants(deps.db, { now, leaseUntil, limit: deps.batchRows });
  const result: VoterRolePassResult = { claimed: rows.length, added: 0, removed: 0, failed: 0 };
  for (const row of rows) {
    const outcome = await stepOne(deps, row, now, leaseUntil);
    if (outcome !== "none") result[outcome] += 1;
  }
  return result;
}

async function stepOne(deps: VoterRolePassDeps, g: DueGrant, now: Date, claimedDueAt: Date): Promise<"added" | "removed" | "failed" | "none"> {
  const configured = g.bot_token_sealed !== null && g.guild_id !== null && g.role_id !== null;
  const step = decideVoterRoleStep({ expiresAt: g.expires_at, given: g.given, configured }, now);
  const key = { serverId: g.server_id, discordId: g.discord_id, now, claimedDueAt };
  if (step.kind === "forget" || !configured) {
    // A role never given, or voter roles turned off (the token is gone): nothing to call; the grant is deleted.
    await deleteLapsedGrant(deps.db, key);
    return "none";
  }
  let botToken: string;
  try {
    botToken = deps.secretBox.open(g.bot_token_sealed as string);
  } catch (error) {
    // Failure policy: fail closed - a token that does not open (SECRETS_KEY changed) is recorded as the server's failure and retried later.
    return failed(deps, g, key, `the stored bot token cannot be opened (${(error as Error).name})`);
  }
  const answer = await deps.discord.request({
    method: step.kind === "add" ? "PUT" : "DELETE",
    path: `/guilds/${g.guild_id}/members/${g.discord_id}/roles/${g.role_id}`,
    botToken,
    maxWaitMs: VOTER_ROLE_MAX_WAIT_MS,
    auditLogReason: step.kind === "add" ? "voted for the server" : "vote role lapsed",
  });
  if (answer.kind === "rateLimited") {
    // Failure policy: reschedule at Discord's time - not a failure of the server's settings, and the client never sends into the limit.
    await rescheduleGrant(deps.db, { ...key, dueAt: new Date(Math.max(answer.retryAt, now.getTime())), given: g.given, attempts: g.attempts });
    return "none";
  }
  // A member who left the guild has no role to add or remove: the step is done.
  const goneMember = answer.kind === "error" && answer.code === DiscordErrorCode.unknownMember;
  if (answer.kind === "ok" || goneMember) {
    await recordVoterRoleOutcome(deps.db, { serverId: g.server_id, error: null, now });
    if (step.kind === "remove") {
      await deleteLapsedGrant(deps.db, key);
      return "removed";
    }
    await rescheduleGrant(deps.db, { ...key, dueAt: g.expires_at, given: !goneMember, attempts: 0 });
    return "added";
  }
  return failed(deps, g, key, describeFailure(step.kind, answer));
}

/**
 * A failed call in the owner's words, without the voter's Discord id (the client's own text names the path, which
 * holds it): what was asked, Discord's status, message and code, or that Discord could not be reached.
 */
function describeFailure(step: "add" | "remove", answer: Exclude<DiscordAnswer, { kind: "ok" | "rateLimited" }>): string {
  const asked = step === "add" ? "Add Guild Member Role" : "Remove Guild Member Role";
  if (answer.kind === "failed") return `${asked}: no answer from Discord (a timeout or a connection failure)`;
  return `Discord answered ${answer.status} to ${asked}: ${answer.message}${answer.code ? ` (${answer.code})` : ""}`;
}

/** Records a failed step on the server's settings and retries it later, or gives it up. */
async function failed(
  deps: VoterRolePassDeps,
  g: DueGrant,
  key: { serverId: string; discordId: string; now: Date; claimedDueAt: Date },
  error: string,
): Promise<"failed"> {
  const { now } = key;
  await recordVoterRoleOutcome(deps.db, { serverId: g.server_id, error, now });
  deps.log.warn({ serverId: g.server_id, attempt: g.attempts + 1, error }, "voter role not changed; retried later");
  const retry = retryVoterRoleStep(g.attempts, now);
  if (retry.kind === "retry") {
    await rescheduleGrant(deps.db, { ...key, dueAt: retry.at, given: g.given, attempts: g.attempts + 1 });
  } else if (g.expires_at.getTime() > now.getTime()) {
    // Failure policy: give the add up after MAX_VOTER_ROLE_ATTEMPTS - looked at again when it lapses (a removal, if it was given before).
    await rescheduleGrant(deps.db, { ...key, dueAt: g.expires_at, given: g.given, attempts: 0 });
  } else {
    // Failure policy: give the removal up after MAX_VOTER_ROLE_ATTEMPTS - the grant is deleted; the failure stays on the dashboard.
    await deleteLapsedGrant(deps.db, key);
  }
  return "failed";
}

/** The role job of the delivery service: start() and stop() (waits for a pass in progress). */
export type VoterRoleLoop = PassLoop;

/**
 * Runs a pass every `intervalSeconds` (timed from the end of the last, so passes never overlap), at once again when a
 * pass claimed a full batch. Several instances at once are safe: grants are claimed with SKIP LOCKED and leased.
 */
export function createVoterRoleLoop(deps: VoterRolePassDeps & { intervalSeconds: number; now: () => Date }): VoterRoleLoop {
  return createPassLoop({
    pass: (now) => runVoterRolePass(deps, now),
    batchRows: deps.batchRows,
    intervalSeconds: deps.intervalSeconds,
    now: deps.now,
    log: deps.log,
    failureText: "voter role pass failed; retried at the next interval",
  });
}
