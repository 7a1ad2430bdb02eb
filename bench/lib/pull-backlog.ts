/**
 * The pull phase's servers and their backlogs (bench/run.ts `--phases=pull`): pull-enabled servers with
 * pending `pull` deliveries of counted hearts, heavy-tailed as a list's servers are: one server with a
 * large backlog (a server whose plugin was down for days) and many with a small one. The backlog is
 * written in SQL, as the other phases seed (the rows the delivery consumer stores for a counted heart
 * of a pull-enabled server: transport `pull`, status `pending`, dedup key = heart id, no endpoint), and
 * topped up before every round, since claiming drains it. On the history database each server also has
 * its claimed past (writePullPast): the history template itself holds no pull delivery (its deliveries
 * are delivered callbacks), while a pull server of a list after years has claimed many.
 *
 * Ids and heart ids are time-ordered (uuid_v7(), as the service makes them: CastHeart's heart ids, the consumer's
 * delivery ids), so the indexes the claims update look like production's (random version 4 ids put every claimed
 * row on a random leaf).
 */
import type { Client } from "@connectrpc/connect";
import type pg from "pg";
import type { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";
import { periodOf } from "../../services/shared/values/period.js";

/** One pull-enabled server of the phase: its pull secret, and how many pending hearts it has at the start of each round. */
export interface PullServer {
  serverId: string;
  secret: string;
  backlog: number;
}

/**
 * The backlog of each of `servers` servers: the first one `big`, every other one `small` (a heavy tail:
 * one plugin far behind, the rest nearly caught up). At least one server.
 */
export function pullBacklogSizes(servers: number, big: number, small: number): number[] {
  if (!Number.isInteger(servers) || servers < 1) throw new Error(`the pull phase needs at least one server, not ${servers}`);
  if (!(big >= 0 && small >= 0)) throw new Error(`backlogs are counts of hearts, not ${big} and ${small}`);
  return Array.from({ length: servers }, (_, i) => (i === 0 ? big : small));
}

/** Creates one server per backlog size with its pull API on (SetPullEnabled creates its pull secret), in the database the referral service uses. */
export async function createPullServers(admin: Client<typeof ServerAdminService>, sizes: number[]): Promise<PullServer[]> {
  const servers: PullServer[] = [];
  for (const [i, backlog] of sizes.entries()) {
    const { server } = await admin.createServer({ name: `bench pull ${i}`, registrationUrl: "https://example.com/register" });
    const serverId = server?.id ?? "";
    await admin.setPullEnabled({ serverId, enabled: true });
    const { secret } = await admin.revealPullSecret({ serverId });
    servers.push({ serverId, secret, backlog });
  }
  return servers;
}

/**
 * Inserts pending pull deliveries until each server has `backlog` of them, newest last (created_at increases
 * row by row, so they list after what is already pending). Returns how many rows were written.
 */
export async function topUpPullBacklog(sql: pg.Client, servers: PullServer[], now: Date): Promise<number> {
  const result = await sql.query(
    `WITH want AS (
       SELECT s.server_id, s.backlog - (SELECT count(*) FROM deliveries d
                                        WHERE d.server_id = s.server_id AND d.transport = 'pull' AND d.status = 'pending'
                                          AND d.event_type = 'heart.counted')::int AS missing
       FROM unnest($1::uuid[], $2::int[]) AS s(server_id, backlog))
     INSERT INTO deliveries (id, server_id, heart_id, dedup_key, event_type, username, voter_identity, period, streak_day, counted_at,
                             steam_id, transport, status, created_at)
     SELECT uuid_v7(), x.server_id, x.heart_id, x.heart_id::text, 'heart.counted', 'player_' || x.g, 'bench-pull-' || x.heart_id,
            $3, 1 + x.g % 7, $4::timestamptz, (76561197960265728 + x.g)::text, 'pull', 'pending', clock_timestamp()
     FROM (SELECT w.server_id, g, uuid_v7() AS heart_id FROM want w CROSS JOIN LATERAL generate_series(1, greatest(w.missing, 0)) AS g) AS x
     ORDER BY x.server_id, x.g`,
    [servers.map((s) => s.serverId), servers.map((s) => s.backlog), periodOf(now), now.toISOString()],
  );
  return result.rowCount ?? 0;
}

/** A server's claimed past on the history database: this many delivered pull hearts per pending one of its backlog, times the history's scale. */
export const PULL_PAST_PER_PENDING = 10;

/**
 * The history side's claimed past of the pull servers: `PULL_PAST_PER_PENDING` x backlog x `scale` delivered
 * pull deliveries per server (each claimed 30 s after it was stored), spread over the two years before
 * `now`, so older than every pending one. Their attempt rows are not written: neither the pull list nor the
 * claim reads attempts. Returns how many rows were written.
 */
export async function writePullPast(sql: pg.Client, servers: PullServer[], scale: number, now: Date): Promise<number> {
  const result = await sql.query(
    `INSERT INTO deliveries (id, server_id, heart_id, dedup_key, event_type, username, voter_identity, period, streak_day, counted_at,
                             transport, status, attempts, last_status_code, delivered_at, created_at)
     SELECT uuid_v7(), x.server_id, x.heart_id, x.heart_id::text, 'heart.counted', 'player_' || x.g, 'bench-pull-' || x.heart_id,
            to_char(x.at AT TIME ZONE 'UTC', 'YYYY-MM'), 1 + x.g % 7, x.at, 'pull', 'delivered', 1, 200, x.at + interval '30 seconds', x.at
     FROM (SELECT s.server_id, g, uuid_v7() AS heart_id,
                  $3::timestamptz - interval '1 hour' - (g * (730 * 86400.0 / s.n)) * interval '1 second' AS at
           FROM unnest($1::uuid[], $2::int[]) AS s(server_id, n) CROSS JOIN LATERAL generate_series(1, s.n) AS g) AS x`,
    [servers.map((s) => s.serverId), servers.map((s) => Math.max(1, Math.round(s.backlog * PULL_PAST_PER_PENDING * scale))), now.toISOString()],
  );
  return result.rowCount ?? 0;
}
