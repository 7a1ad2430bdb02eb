/**
 * A production-shaped history: the tables of a large list at its steady-state size, with the heavy-tailed keys
 * real traffic has, generated in SQL (INSERT ... SELECT over generate_series; no row crosses the network) into a
 * migrated database. At scale 1:
 *
 * | table | rows | shape |
 * |---|---:|---|
 * | servers | 10,000 | server 0 takes 40 % of all traffic |
 * | hearts | 5,000,000 | a fifth from 100 carrier-grade NAT addresses; one address with 100,000 inside every rule window |
 * | referral_clicks | 2,000,000 | the same address mix; the same hot address with 100,000 in the windows; half linked |
 * | referrals (+ credits for the qualified) | 1,000,000 | one per (server, referee) |
 * | vote_claims | 3,000,000 | mostly claimed or expired, a few held |
 * | outbox | 5,000,000 | published |
 * | deliveries + delivery_attempts | 5,000,000 + 5,000,000 | delivered callbacks with their exchange bodies |
 * | voter_states | 1,000,000 | |
 *
 * Times spread over two years before `now`, except the hot address's rows, which sit inside the last hour.
 * Deterministic (no random()): the same scale gives the same rows. Triggers and foreign-key checks are off while
 * it loads (session_replication_role = replica), so the servers' default endpoints are inserted here, and the
 * outbox's commit notification does not fire 5 million times. Ends with VACUUM ANALYZE.
 */
import type pg from "pg";

/** The address with 100,000 clicks and hearts inside the rule windows (an attacker's, or a school's). */
export const HOT_ADDRESS = "203.0.113.66";
/** The hot address's /24, as the clicks' and hearts' `subnet` column holds it. */
export const HOT_SUBNET = "203.0.113.0/24";
/** Server number 0: the hot server (40 % of all traffic), where the hot address's clicks are. */
export const HISTORY_HOT_SERVER_ID = "00000000-0000-4000-8000-000000000000";
/** Carrier-grade NAT: 100 addresses in 100.64.0.0/10 carry a fifth of hearts and clicks. */
export const CGNAT_ADDRESSES = 100;
/** The version of the generated shape: a template built by another version is rebuilt. */
export const HISTORY_VERSION = 2;

/** Row counts at scale 1 (the steady-state sizes). */
export const HISTORY_ROWS = {
  servers: 10_000,
  hearts: 5_000_000,
  clicks: 2_000_000,
  referrals: 1_000_000,
  claims: 3_000_000,
  outbox: 5_000_000,
  deliveries: 5_000_000,
  voters: 1_000_000,
  hotRows: 100_000,
} as const;

/** The counts at `scale` (at least 1 row each; the hot address keeps its share). */
export function historyRowsAt(scale: number): Record<keyof typeof HISTORY_ROWS, number> {
  const at = (n: number) => Math.max(1, Math.round(n * scale));
  return {
    servers: Math.max(2, at(HISTORY_ROWS.servers)),
    hearts: at(HISTORY_ROWS.hearts),
    clicks: at(HISTORY_ROWS.clicks),
    referrals: at(HISTORY_ROWS.referrals),
    claims: at(HISTORY_ROWS.claims),
    outbox: at(HISTORY_ROWS.outbox),
    deliveries: at(HISTORY_ROWS.deliveries),
    voters: at(HISTORY_ROWS.voters),
    hotRows: at(HISTORY_ROWS.hotRows),
  };
}

/**
 * SQL expressions over `g` (the row number) shared by the tables: which server a row is for (40 % the hot
 * server, the rest spread), and which address it came from (a fifth CGNAT, the rest spread over 16 million).
 */
export function shapeSql(servers: number): { server: string; serverOf: (g: string) => string; ip: string; subnet: string } {
  const serverOf = (g: string) => `(CASE WHEN ${g} % 5 < 2 THEN 0 ELSE 1 + (hashint4(${g}) & 2147483647) % ${servers - 1} END)`;
  const server = serverOf("g");
  const cgnat = `'100.64.' || ((g % ${CGNAT_ADDRESSES}) / 256) || '.' || (g % ${CGNAT_ADDRESSES}) % 256`;
  const spread = `'10.' || ((hashint4(g) & 16777215) >> 16) || '.' || ((hashint4(g) & 65535) >> 8) || '.' || (hashint4(g) & 255)`;
  const ip = `(CASE WHEN g % 5 = 4 THEN ${cgnat} ELSE ${spread} END)`;
  const subnet = `(CASE WHEN g % 5 = 4 THEN '100.64.0.0/24' ELSE '10.' || ((hashint4(g) & 16777215) >> 16) || '.' || ((hashint4(g) & 65535) >> 8) || '.0/24' END)`;
  return { server, serverOf, ip, subnet };
}

/** The server id of server number `n` (deterministic uuids, so tables refer to servers without a join). */
export const serverIdSql = (n: string) => `('00000000-0000-4000-8000-' || lpad(to_hex(${n}), 12, '0'))::uuid`;
/** A deterministic uuid for row `g` of a table numbered `table` (1-15). */
export const rowIdSql = (table: number, g = "g") => `('${table.toString(16).padStart(8, "0")}-0000-4000-8000-' || lpad(to_hex(${g}), 12, '0'))::uuid`;

/** The statements, in order, that build the history at `scale` as of `now`. */
export function historyStatements(scale: number, now: Date): Array<{ what: string; sql: string }> {
  const n = historyRowsAt(scale);
  const { server, serverOf, ip, subnet } = shapeSql(n.servers);
  const at = `'${now.toISOString()}'::timestamptz`;
  // Spread over two years; the hot address's rows inside the last hour (every rule window holds them).
  const spreadAt = `${at} - ((hashint4(g + 7) & 2147483647) % (730 * 86400)) * interval '1 second'`;
  const hotAt = `${at} - (g % 3600) * interval '1 second'`;
  const hotServer = `'${HISTORY_HOT_SERVER_ID}'::uuid`;
  return [
    { what: "settings", sql: "SET session_replication_role = replica" },
    {
      what: `${n.servers} servers`,
      sql: `INSERT INTO servers (id, name, referrals_enabled, claims_enabled, pull_enabled, created_at)
            SELECT ${serverIdSql("g")}, 'History server ' || g, true, g % 3 = 0, g % 7 = 0, ${at} - interval '800 days'
            FROM generate_series(0, ${n.servers - 1}) AS g`,
    },
    {
      what: "default callback endpoints",
      sql: `INSERT INTO callback_endpoints (id, server_id, is_default, url, event_types, created_at)
            SELECT ${rowIdSql(1)}, ${serverIdSql("g")}, true, 'https://game-' || g || '.example/hook', '{heart.counted}', ${at} - interval '800 days'
            FROM generate_series(0, ${n.servers - 1}) AS g`,
    },
    {
      what: `${n.hearts} hearts (${n.hotRows} from the hot address)`,
      sql: `INSERT INTO hearts (id, server_id, username, voter_identity, ip, subnet, user_agent, counted, verdict, fraud_score, fraud_reasons, period, streak_day, created_at)
            SELECT ${rowIdSql(2)}, ${serverIdSql(server)}, 'player' || (g % ${n.voters}), 'voter-' || (g % ${n.voters}),
                   CASE WHEN g <= ${n.hotRows} THEN '${HOT_ADDRESS}' ELSE ${ip} END,
                   CASE WHEN g <= ${n.hotRows} THEN '${HOT_SUBNET}' ELSE ${subnet} END,
                   'Mozilla/5.0 (history)', g % 10 <> 0, CASE WHEN g % 10 <> 0 THEN 'counted' ELSE 'cooldown' END, 0, '{}',
                   to_char(CASE WHEN g <= ${n.hotRows} THEN ${hotAt} ELSE ${spreadAt} END, 'YYYY-MM'), 1,
                   CASE WHEN g <= ${n.hotRows} THEN ${hotAt} ELSE ${spreadAt} END
            FROM generate_series(1, ${n.hearts}) AS g`,
    },
    {
      what: `${n.voters} voter states`,
      sql: `INSERT INTO voter_states (server_id, voter_identity, last_counted_at, last_day, streak_days)
            SELECT ${serverIdSql(server)}, 'voter-' || g, ${spreadAt}, (${spreadAt})::date, 1
            FROM generate_series(1, ${n.voters}) AS g
            ON CONFLICT DO NOTHING`,
    },
    {
      what: `${n.referrals} referrals and the qualified ones' credits`,
      sql: `WITH r AS (
              INSERT INTO referrals (id, server_id, referee_identity, referrer_identity, state, registered_at, qualified_at)
              SELECT ${rowIdSql(3)}, ${serverIdSql(server)}, 'referee-' || g, 'referrer-' || (g % 50000),
                     CASE WHEN g % 3 = 0 THEN 'registered' ELSE 'qualified' END::"ReferralState", ${spreadAt},
                     CASE WHEN g % 3 = 0 THEN NULL ELSE ${spreadAt} + interval '1 day' END
              FROM generate_series(1, ${n.referrals}) AS g
              RETURNING id, server_id, referrer_identity, qualified_at)
            INSERT INTO referral_credits (referral_id, server_id, referrer_identity, period, credited_at)
            SELECT id, server_id, referrer_identity, to_char(qualified_at, 'YYYY-MM'), qualified_at FROM r WHERE qualified_at IS NOT NULL`,
    },
    {
      what: `${n.clicks} clicks (${n.hotRows} from the hot address; half linked)`,
      sql: `INSERT INTO referral_clicks (id, server_id, referrer_identity, token, referral_id, ip, subnet, user_agent, created_at)
            SELECT ${rowIdSql(4)},
                   CASE WHEN g <= ${n.hotRows} THEN ${hotServer} WHEN g % 2 = 0 AND g / 2 <= ${n.referrals} THEN ${serverIdSql(serverOf("(g / 2)"))} ELSE ${serverIdSql(server)} END,
                   'referrer-' || (g % 50000), 'h' || g,
                   CASE WHEN g > ${n.hotRows} AND g % 2 = 0 AND g / 2 <= ${n.referrals} THEN ${rowIdSql(3, "(g / 2)")} END,
                   CASE WHEN g <= ${n.hotRows} THEN '${HOT_ADDRESS}' ELSE ${ip} END,
                   CASE WHEN g <= ${n.hotRows} THEN '${HOT_SUBNET}' ELSE ${subnet} END, 'Mozilla/5.0 (history)',
                   CASE WHEN g <= ${n.hotRows} THEN ${hotAt} ELSE ${spreadAt} END
            FROM generate_series(1, ${n.clicks}) AS g`,
    },
    {
      what: `${n.claims} claim-ledger rows`,
      sql: `INSERT INTO vote_claims (heart_id, server_id, player_key, username_lower, counted_at, expires_at, claimed_at, state, expired_reason, expired_at)
            SELECT ${rowIdSql(2)}, ${serverIdSql(server)}, 'player' || (g % ${n.voters}), 'player' || (g % ${n.voters}), ${spreadAt}, ${spreadAt} + interval '30 days',
                   CASE WHEN g % 4 <> 0 THEN ${spreadAt} + interval '1 hour' END,
                   CASE WHEN g % 4 <> 0 THEN 'claimed' WHEN g % 100 = 0 THEN 'held' ELSE 'expired' END::"VoteClaimState",
                   CASE WHEN g % 4 = 0 AND g % 100 <> 0 THEN 'window' END, CASE WHEN g % 4 = 0 AND g % 100 <> 0 THEN ${spreadAt} + interval '30 days' END
            FROM generate_series(1, ${n.claims}) AS g`,
    },
    {
      what: `${n.outbox} published outbox rows`,
      sql: `INSERT INTO outbox (topic, key, type, payload, shard, created_at, published_at)
            SELECT 'hearts.events.v1', ${serverIdSql(server)}::text, 'heart.counted', convert_to(repeat('x', 300) || g, 'UTF8'), g % 64, ${spreadAt}, ${spreadAt} + interval '20 milliseconds'
            FROM generate_series(1, ${n.outbox}) AS g`,
    },
    {
      what: `${n.deliveries} delivered deliveries`,
      sql: `INSERT INTO deliveries (id, server_id, heart_id, event_type, username, voter_identity, period, counted_at, status, attempts, next_attempt_at,
                                    last_status_code, delivered_at, created_at, transport, dedup_key, endpoint_id)
            SELECT ${rowIdSql(5)}, ${serverIdSql(server)}, ${rowIdSql(2)}, 'heart.counted', 'player' || (g % ${n.voters}), 'voter-' || (g % ${n.voters}),
                   to_char(${spreadAt}, 'YYYY-MM'), ${spreadAt}, 'delivered', 1, ${spreadAt}, 200, ${spreadAt} + interval '15 milliseconds', ${spreadAt},
                   'callback', ${rowIdSql(2)}::text, ${rowIdSql(1, server)}
            FROM generate_series(1, ${n.deliveries}) AS g`,
    },
    {
      what: `${n.deliveries} attempt rows with their exchanges`,
      sql: `INSERT INTO delivery_attempts (delivery_id, server_id, attempt, url, started_at, status_code, latency_ms, succeeded,
                                          request_headers, request_body, response_headers, response_body)
            SELECT ${rowIdSql(5)}, ${serverIdSql(server)}, 1, 'https://game.example/hook', ${spreadAt}, 200, 12, true,
                   '{"content-type": "application/json", "x-signature": "t=1,v1=history"}', '{"type":"heart.counted","heart_id":"' || g || '","username":"player","period":"2026-01"}' || repeat(' ', 200),
                   '{"content-type": "text/plain"}', 'ok'
            FROM generate_series(1, ${n.deliveries}) AS g`,
    },
    {
      what: "the address-voter set CastHeart's identity rules read (as its migration backfills it)",
      sql: `INSERT INTO heart_address_voters (server_id, address, voter_identity, last_counted_at)
            SELECT h.server_id, a.address, h.voter_identity, max(h.created_at)
            FROM hearts h CROSS JOIN LATERAL (VALUES (h.ip), (h.subnet)) AS a(address)
            WHERE h.counted
            GROUP BY h.server_id, a.address, h.voter_identity`,
    },
    {
      what: "server rankings",
      sql: `INSERT INTO server_rankings (server_id, period, hearts)
            SELECT server_id, period, count(*)::int FROM hearts WHERE counted GROUP BY 1, 2
            ON CONFLICT DO NOTHING`,
    },
    { what: "settings back", sql: "SET session_replication_role = DEFAULT" },
    { what: "vacuum analyze", sql: "VACUUM (ANALYZE)" },
  ];
}

/**
 * The statements that move the hot address's rows (built inside the hour before `builtAt`) by the time since the
 * build, so a clone of a template built days ago still has them inside every rule window. Only those rows move
 * (the rest is spread over two years, where a few days make no difference); their month follows.
 */
export function historyRefreshStatements(builtAt: Date, now: Date): Array<{ what: string; sql: string }> {
  const shift = `interval '${Math.max(0, Math.floor((now.getTime() - builtAt.getTime()) / 1000))} seconds'`;
  return [
    {
      what: "hot address's hearts into the rule windows",
      sql: `UPDATE hearts SET created_at = created_at + ${shift}, period = to_char(created_at + ${shift}, 'YYYY-MM') WHERE ip = '${HOT_ADDRESS}'`,
    },
    {
      what: "hot address's voter set into the rule windows",
      sql: `UPDATE heart_address_voters SET last_counted_at = last_counted_at + ${shift} WHERE address IN ('${HOT_ADDRESS}', '${HOT_SUBNET}')`,
    },
    {
      what: "hot address's clicks into the rule windows",
      sql: `UPDATE referral_clicks SET created_at = created_at + ${shift} WHERE server_id = '${HISTORY_HOT_SERVER_ID}'::uuid AND ip = '${HOT_ADDRESS}'`,
    },
  ];
}

/** Builds the history into the migrated database `client` is connected to; reports each step and its time. */
export async function buildHistory(client: pg.Client, scale: number, now: Date, progress: (line: string) => void): Promise<void> {
  for (const step of historyStatements(scale, now)) {
    const started = Date.now();
    await client.query(step.sql);
    progress(`history: ${step.what} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
}
