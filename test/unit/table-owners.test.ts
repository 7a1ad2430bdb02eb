/**
 * Every table has an owner list: the modules that may write it. A statement (`INSERT INTO`, `UPDATE`,
 * `DELETE FROM`) or a Prisma model-API write (`.<model>.create|update|delete|upsert...`) anywhere else in
 * services/ fails this test. Comments and `ON CONFLICT ... DO UPDATE` are not writes of their own.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import test from "ava";

const ROOT = join(import.meta.dirname, "..", "..");

/** Table -> the files that own its writes (relative to the repository). */
const TABLE_OWNERS: Record<string, readonly string[]> = {
  // secret-store.ts: lockServer's update that changes nothing (the server row lock of the secret and settings transactions).
  servers: [
    "services/servers/server-store.ts",
    "services/servers/claim-settings.ts",
    "services/servers/secret-store.ts",
    "services/access/owners.ts",
    "services/referral/review-referral.ts",
  ],
  server_secrets: ["services/servers/secret-store.ts", "services/servers/claim-settings.ts"],
  referral_clicks: ["services/referral/record-click.ts", "services/referral/apply-event.ts"],
  referrals: ["services/referral/apply-event.ts", "services/referral/review-referral.ts"],
  referral_events: ["services/referral/apply-event.ts"],
  referral_credits: ["services/referral/apply-event.ts"],
  // store.ts also holds a voter's erasure's fragments (services/voter-data/erase-voter-data.ts runs them), as every owner below does.
  hearts: ["services/hearts/store.ts"],
  voter_states: ["services/hearts/store.ts"],
  server_rankings: ["services/hearts/store.ts"],
  // The identity fraud rules' set, kept by the write that counts a heart.
  heart_address_voters: ["services/hearts/store.ts"],
  outbox: ["services/shared/adapters/outbox.ts", "services/relay/statements.ts", "services/shared/adapters/dead-letters.ts"],
  dead_letters: ["services/shared/adapters/dead-letters.ts"],
  // The delivery lifecycle: one fragment per move of services/delivery/pipeline/domain/delivery-transitions.ts.
  deliveries: ["services/delivery/pipeline/write-deliveries.ts"],
  delivery_attempts: ["services/delivery/pipeline/attempt-log.ts"],
  service_tokens: ["services/access/service-tokens.ts"],
  owners: ["services/access/owners.ts"],
  dashboard_login_links: ["services/access/dashboard-sessions.ts"],
  dashboard_sessions: ["services/access/dashboard-sessions.ts"],
  callback_health: ["services/delivery/pipeline/endpoint-health.ts", "services/servers/endpoint-store.ts"],
  callback_endpoints: ["services/servers/endpoint-store.ts", "services/delivery/pipeline/endpoint-health.ts"],
  secrets_key_check: ["services/shared/adapters/secrets-key-check.ts"],
  webhook_signing_keys: ["services/servers/webhook-signing-keys.ts"],
  // The claim ledger: CastHeart's hold and expiry, the claim, pay-once's withdrawal, retention's removal of expired rows.
  vote_claims: ["services/claims/write-vote-claims.ts"],
  delivery_workers: ["services/delivery/pipeline/worker-liveness.ts"],
  // Pay-once mode: every payout write and the one "still payable" rule.
  heart_payouts: ["services/payouts/write-payouts.ts"],
  // The reward plugins' recent calls: one upsert per batch (RecordPluginCalls), its age limit in the same statement.
  plugin_activity: ["services/plugin-activity/record-plugin-calls.ts"],
  // A voter's export and erasure: the audit of every one.
  voter_data_audit: ["services/voter-data/voter-data-audit.ts"],
  reward_rule_versions: ["services/rewards/reward-rules-store.ts"],
  reward_queue_entries: ["services/rewards/reward-queue-store.ts"],
  vote_reminders: ["services/reminders/reminder-store.ts"],
  voter_role_settings: ["services/voter-roles/voter-role-store.ts"],
  voter_role_grants: ["services/voter-roles/voter-role-store.ts"],
  // Owner alerts: the causes' writes as fragments (composed into the disable and the attempt record), the sender's marks.
  owner_alerts: ["services/alerts/alert-store.ts"],
  owner_alert_channels: ["services/alerts/alert-store.ts"],
  voter_reward_states: ["services/rewards/reward-queue-store.ts"],
  // Period awards: the standings' counts (the reward step) and the periods' open/closed mark (the period closer).
  voter_period_tallies: ["services/rewards/period-store.ts"],
  reward_periods: ["services/rewards/period-store.ts"],
  // Network goals (vote party): the goals, the hearts each counted once, the rounds' voters and the rounds reached.
  network_goals: ["services/rewards/network-goal-store.ts"],
  network_goal_servers: ["services/rewards/network-goal-store.ts"],
  network_goal_hearts: ["services/rewards/network-goal-store.ts"],
  network_goal_voters: ["services/rewards/network-goal-store.ts"],
  network_goal_rounds: ["services/rewards/network-goal-store.ts"],
};

/** The schema's models: Prisma client accessor (`voteClaim`) -> table (`vote_claims`). */
function modelTables(): Map<string, string> {
  const schema = readFileSync(join(ROOT, "prisma", "schema.prisma"), "utf8");
  const models = new Map<string, string>();
  for (const [, name, body] of schema.matchAll(/^model (\w+) \{([\s\S]*?)^\}/gm)) {
    const table = /@@map\("(\w+)"\)/.exec(body!)?.[1] ?? name!;
    models.set(name!.charAt(0).toLowerCase() + name!.slice(1), table);
  }
  return models;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** The source without comments: block and line comments of TypeScript, and `--` comments of SQL. */
function withoutComments(source: string): string {
  return source
    .replace(/\/\*[\s\S]*?\*\//g, " ")
    .replace(/(^|[\s;,(){}])\/\/[^\n]*/g, "$1")
    .replace(/(^|\s)--[^\n]*/g, "$1");
}

const MODEL_WRITE = /\.(\w+)\.(create|createMany|createManyAndReturn|update|updateMany|updateManyAndReturn|upsert|delete|deleteMany)\(/g;
const SQL_WRITE = /\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?([A-Za-z_][A-Za-z0-9_]*)"?/gi;

/** Every write in `source`: [table, what]. Only names of tables count (so `FOR UPDATE OF c` and prose never do). */
function writesIn(source: string, models: ReadonlyMap<string, string>): Array<[string, string]> {
  const tables = new Set(models.values());
  const code = withoutComments(source);
  const writes: Array<[string, string]> = [];
  for (const m of code.matchAll(SQL_WRITE)) {
    const table = m[2]!.toLowerCase();
    // `ON CONFLICT ... DO UPDATE SET`: part of its INSERT, not a write of another table.
    if (/\bDO\s+$/i.test(code.slice(Math.max(0, m.index - 8), m.index))) continue;
    if (tables.has(table)) writes.push([table, m[0].replace(/\s+/g, " ")]);
  }
  for (const m of code.matchAll(MODEL_WRITE)) {
    const table = models.get(m[1]!);
    if (table !== undefined) writes.push([table, m[0]]);
  }
  return writes;
}

test("every table of prisma/schema.prisma has an owner list, and every owner file exists", (t) => {
  const tables = [...modelTables().values()].sort();
  t.deepEqual(Object.keys(TABLE_OWNERS).sort(), tables);
  for (const file of Object.values(TABLE_OWNERS).flat()) t.notThrows(() => readFileSync(join(ROOT, file)), file);
});

test("every write of a table in services/ (INSERT INTO, UPDATE, DELETE FROM, Prisma model-API writes) is in one of its owner files", (t) => {
  const models = modelTables();
  const stray: string[] = [];
  for (const file of tsFiles(join(ROOT, "services"))) {
    const path = relative(ROOT, file).split("\\").join("/");
    for (const [table, what] of writesIn(readFileSync(file, "utf8"), models)) {
      if (!TABLE_OWNERS[table]?.includes(path)) stray.push(`${path}: ${what} (owners of ${table}: ${TABLE_OWNERS[table]?.join(", ")})`);
    }
  }
  t.deepEqual(stray, []);
});

test("the scan sees statements and model writes, and skips comments, ON CONFLICT DO UPDATE and FOR UPDATE OF", (t) => {
  const models = new Map([
    ["delivery", "deliveries"],
    ["voteClaim", "vote_claims"],
  ]);
  const source = [
    "// UPDATE deliveries in a comment",
    "/* DELETE FROM vote_claims */",
    "const a = sql`INSERT INTO vote_claims (x) VALUES (1) ON CONFLICT (x) DO UPDATE SET x = 2 -- UPDATE deliveries`;",
    "const b = sql`SELECT 1 FROM deliveries d FOR UPDATE OF d SKIP LOCKED`;",
    "const c = sql`update  deliveries d SET lease_until = NULL`;",
    "await prisma.delivery.updateMany({});",
  ].join("\n");
  t.deepEqual(writesIn(source, models), [
    ["vote_claims", "INSERT INTO vote_claims"],
    ["deliveries", "update deliveries"],
    ["deliveries", ".delivery.updateMany("],
  ]);
});
