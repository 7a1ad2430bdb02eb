/**
 * The queue phase's servers and their reward queues (bench/run.ts `--phases=queue`, issue 31): many servers whose
 * reward plugins poll the queue (`GET /api/rewards/queue`) every 30 s, as a list with QUEUE_SERVERS game servers
 * running a reward plugin would see. The queues are heavy-tailed: one hot server with a large pending backlog (a
 * popular server whose plugin was down), one in ten with a few pending entries, the rest empty (most polls find
 * nothing). The pending entries are written in SQL, as the other phases seed (the rows the delivery consumer queues
 * for a counted vote: reason `vote`, one command, not online-only), and topped up before every round, since acks drain
 * them. On the history database every server also has its acknowledged past (writeRewardQueuePast).
 */
import type { Client } from "@connectrpc/connect";
import type pg from "pg";
import type { ServerAdminService } from "../../gen/proto/servers/v1/servers_pb.js";

/** One server of the phase: its claim key (the plugin's credential) and how many entries are pending at each round's start. */
export interface QueueServer {
  serverId: string;
  key: string;
  pending: number;
}

/** The pending entries of each of `servers` servers: the first `hot`, every tenth `few`, the others none. */
export function queuePendingSizes(servers: number, hot: number, few: number): number[] {
  if (!Number.isInteger(servers) || servers < 1) throw new Error(`the queue phase needs at least one server, not ${servers}`);
  return Array.from({ length: servers }, (_, i) => (i === 0 ? hot : i % 10 === 0 ? few : 0));
}

/**
 * Creates one server per size with a claim key (CreateServer, RotateClaimKey), `concurrency` at a time, reporting
 * progress every 1,000 servers (10,000 servers take a minute or so).
 */
export async function createQueueServers(
  admin: Client<typeof ServerAdminService>,
  sizes: number[],
  progress: (line: string) => void,
  concurrency = 16,
): Promise<QueueServer[]> {
  const servers: QueueServer[] = new Array(sizes.length);
  let next = 0;
  const started = Date.now();
  const worker = async () => {
    for (let i = next++; i < sizes.length; i = next++) {
      const { server } = await admin.createServer({ name: `bench queue ${i}`, registrationUrl: "https://example.com/register" });
      const serverId = server?.id ?? "";
      const { claimKey } = await admin.rotateClaimKey({ serverId });
      servers[i] = { serverId, key: claimKey, pending: sizes[i] ?? 0 };
      if ((i + 1) % 1_000 === 0) progress(`queue: ${i + 1} of ${sizes.length} servers with claim keys (${Math.round((Date.now() - started) / 1000)} s)`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return servers;
}

/**
 * Inserts pending entries until each server has `pending` of them, newest last. Returns how many rows were written.
 * Each entry's key is unique (a fresh uuid), as a vote's is.
 */
export async function topUpRewardQueue(sql: pg.Client, servers: QueueServer[]): Promise<number> {
  const wanted = servers.filter((s) => s.pending > 0);
  if (wanted.length === 0) return 0;
  const result = await sql.query(
    `WITH want AS (
       SELECT s.server_id, s.pending - (SELECT count(*) FROM reward_queue_entries e
                                        WHERE e.server_id = s.server_id AND e.acked_at IS NULL)::int AS missing
       FROM unnest($1::uuid[], $2::int[]) AS s(server_id, pending))
     INSERT INTO reward_queue_entries (server_id, entry_key, reason, heart_id, username, username_lower, commands, online_only, rules_version, created_at)
     SELECT x.server_id, x.heart_id || ':vote:0', 'vote', x.heart_id, 'Player_' || x.g, 'player_' || x.g,
            ARRAY['give Player_' || x.g || ' diamond 1'], false, 1, clock_timestamp()
     FROM (SELECT w.server_id, g, gen_random_uuid() AS heart_id FROM want w CROSS JOIN LATERAL generate_series(1, greatest(w.missing, 0)) AS g) AS x
     ORDER BY x.server_id, x.g`,
    [wanted.map((s) => s.serverId), wanted.map((s) => s.pending)],
  );
  return result.rowCount ?? 0;
}

/** Acknowledged entries per server on the history database, times the history's scale (the hot server: QUEUE_PAST_HOT_FACTOR times more). */
export const QUEUE_PAST_PER_SERVER = 40;
export const QUEUE_PAST_HOT_FACTOR = 2_000;

/**
 * The history side's acknowledged past: QUEUE_PAST_PER_SERVER x `scale` entries per server (the hot one
 * QUEUE_PAST_HOT_FACTOR times more), each acknowledged a minute after it was queued, spread over the 90 days the
 * queue keeps acknowledged entries (RETENTION_REWARD_QUEUE_ACKED_DAYS), so older than every pending one. Returns the rows written.
 */
export async function writeRewardQueuePast(sql: pg.Client, servers: QueueServer[], scale: number, now: Date): Promise<number> {
  const per = Math.max(1, Math.round(QUEUE_PAST_PER_SERVER * scale));
  const result = await sql.query(
    `INSERT INTO reward_queue_entries (server_id, entry_key, reason, heart_id, username, username_lower, commands, online_only, rules_version,
                                       created_at, acked_at)
     SELECT x.server_id, x.heart_id || ':vote:0', 'vote', x.heart_id, 'Player_' || x.g, 'player_' || x.g,
            ARRAY['give Player_' || x.g || ' diamond 1'], false, 1, x.at, x.at + interval '1 minute'
     FROM (SELECT s.server_id, g, gen_random_uuid() AS heart_id,
                  $3::timestamptz - interval '1 hour' - (g * (90 * 86400.0 / s.n)) * interval '1 second' AS at
           FROM unnest($1::uuid[], $2::int[]) AS s(server_id, n) CROSS JOIN LATERAL generate_series(1, s.n) AS g) AS x`,
    [servers.map((s) => s.serverId), servers.map((_, i) => (i === 0 ? per * QUEUE_PAST_HOT_FACTOR : per)), now.toISOString()],
  );
  return result.rowCount ?? 0;
}
