import { rowIdSql, serverIdSql, shapeSql } from "./history.js";

/**
 * One simulated day of a list's traffic for the storage soak (bench/storage-soak.ts), written set-based in SQL with
 * the history's shapes (bench/lib/history.ts: 40 % of rows on one server, a fifth from carrier-grade NAT addresses):
 * every heart with its address and agent, and for a counted one what the pipeline stores after it: its claim-ledger
 * row, its published outbox row, its delivered callback with one attempt and its exchange, the identity rules' set,
 * the voter's state and the server's ranking; a fifth as many clicks, half of them linked to a referral (with its
 * credit). Row ids continue from day to day, so every day adds rows of its own.
 */
export interface StorageDay {
  /** 0 for the first simulated day. */
  day: number;
  /** When day 0 starts. */
  start: Date;
  heartsPerDay: number;
  servers: number;
  /** Distinct voters the hearts cycle through (a voter votes about heartsPerDay / voters times a day). */
  voters: number;
}

/** The instant the simulated `day` ends (the clock the day's retention pass runs at). */
export function dayEnd(s: Pick<StorageDay, "day" | "start">): Date {
  return new Date(s.start.getTime() + (s.day + 1) * 86_400_000);
}

/** The servers and their default callback endpoints, written once before day 0. */
export function storageSetupStatements(servers: number, start: Date): string[] {
  const at = `'${start.toISOString()}'::timestamptz`;
  return [
    `INSERT INTO servers (id, name, referrals_enabled, claims_enabled, created_at)
     SELECT ${serverIdSql("g")}, 'Soak server ' || g, true, true, ${at} FROM generate_series(0, ${servers - 1}) AS g`,
    `INSERT INTO callback_endpoints (id, server_id, is_default, url, event_types, created_at)
     SELECT ${rowIdSql(1)}, ${serverIdSql("g")}, true, 'https://game-' || g || '.example/hook', '{heart.counted}', ${at}
     FROM generate_series(0, ${servers - 1}) AS g`,
  ];
}

/** A stand-in for an address's keyed pseudonym of the same size (`v1.` and 22 characters; services/shared/values/address-key.ts). */
const pseudonym = (address: string) => `'v1.' || left(md5(${address}), 22)`;

/** The statements of one simulated day, in order. */
export function storageDayStatements(s: StorageDay): string[] {
  const { server, ip, subnet } = shapeSql(s.servers);
  const first = s.day * s.heartsPerDay + 1;
  const last = (s.day + 1) * s.heartsPerDay;
  const dayStart = `'${new Date(s.start.getTime() + s.day * 86_400_000).toISOString()}'::timestamptz`;
  // Spread evenly over the day, in row order.
  const at = `(${dayStart} + ((g - ${first}) * ${86_400 / s.heartsPerDay}) * interval '1 second')`;
  const voter = `(hashint4(g) & 2147483647) % ${s.voters}`;
  const counted = "g % 10 <> 0";
  const hearts = `generate_series(${first}, ${last}) AS g`;
  const clicks = `generate_series(${first}, ${last}) AS g WHERE g % 5 = 0`;
  return [
    `INSERT INTO hearts (id, server_id, username, voter_identity, ip, subnet, ip_key, subnet_key, user_agent, counted, verdict, fraud_score, fraud_reasons, period, streak_day, created_at)
     SELECT ${rowIdSql(2)}, ${serverIdSql(server)}, 'player' || ${voter}, 'voter-' || ${voter}, ${ip}, ${subnet}, ${pseudonym(ip)}, ${pseudonym(subnet)},
            'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36',
            ${counted}, CASE WHEN ${counted} THEN 'counted' ELSE 'cooldown' END, 0, '{}', to_char(${at}, 'YYYY-MM'), 1, ${at}
     FROM ${hearts}`,
    `INSERT INTO vote_claims (heart_id, server_id, player_key, username_lower, counted_at, expires_at, claimed_at, state, expired_reason, expired_at)
     SELECT ${rowIdSql(2)}, ${serverIdSql(server)}, 'player' || ${voter}, 'player' || ${voter}, ${at}, ${at} + interval '1 day',
            CASE WHEN g % 4 <> 0 THEN ${at} + interval '1 hour' END,
            CASE WHEN g % 4 <> 0 THEN 'claimed' ELSE 'expired' END::"VoteClaimState",
            CASE WHEN g % 4 = 0 THEN 'window' END, CASE WHEN g % 4 = 0 THEN ${at} + interval '1 day' END
     FROM ${hearts} WHERE ${counted}`,
    `INSERT INTO outbox (topic, key, type, payload, shard, created_at, published_at)
     SELECT 'hearts.events.v1', ${serverIdSql(server)}::text, 'heart.counted',
            convert_to('{"type":"heart.counted","heart_id":"' || ${rowIdSql(2)} || '","username":"player' || ${voter} || '","period":"' || to_char(${at}, 'YYYY-MM') || '"}', 'UTF8'),
            g % 64, ${at}, ${at} + interval '20 milliseconds'
     FROM ${hearts} WHERE ${counted}`,
    `INSERT INTO deliveries (id, server_id, heart_id, event_type, username, voter_identity, period, counted_at, status, attempts, next_attempt_at,
                             last_status_code, delivered_at, created_at, transport, dedup_key, endpoint_id)
     SELECT ${rowIdSql(5)}, ${serverIdSql(server)}, ${rowIdSql(2)}, 'heart.counted', 'player' || ${voter}, 'voter-' || ${voter},
            to_char(${at}, 'YYYY-MM'), ${at}, 'delivered', 1, ${at}, 200, ${at} + interval '15 milliseconds', ${at},
            'callback', ${rowIdSql(2)}::text, ${rowIdSql(1, server)}
     FROM ${hearts} WHERE ${counted}`,
    `INSERT INTO delivery_attempts (delivery_id, server_id, attempt, url, started_at, status_code, latency_ms, succeeded,
                                    request_headers, request_body, response_headers, response_body)
     SELECT ${rowIdSql(5)}, ${serverIdSql(server)}, 1, 'https://game.example/hook', ${at}, 200, 12, true,
            '{"content-type": "application/json", "webhook-id": "msg", "webhook-timestamp": "1", "webhook-signature": "v1,history"}',
            '{"type":"heart.counted","heart_id":"' || ${rowIdSql(2)} || '","username":"player' || ${voter} || '","voter_identity":"voter-' || ${voter} || '","period":"' || to_char(${at}, 'YYYY-MM') || '","counted_at":"' || ${at} || '"}',
            '{"content-type": "text/plain"}', 'ok'
     FROM ${hearts} WHERE ${counted}`,
    `INSERT INTO heart_address_voters (server_id, address, voter_identity, last_counted_at)
     SELECT ${serverIdSql(server)}, a.address, 'voter-' || ${voter}, max(${at})
     FROM ${hearts} CROSS JOIN LATERAL (VALUES (${ip}), (${subnet})) AS a(address)
     WHERE ${counted}
     GROUP BY 1, 2, 3
     ON CONFLICT (server_id, address, voter_identity) DO UPDATE SET last_counted_at = excluded.last_counted_at`,
    `INSERT INTO voter_states (server_id, voter_identity, last_counted_at, last_day, streak_days)
     SELECT ${serverIdSql(server)}, 'voter-' || ${voter}, max(${at}), max(${at})::date, 1
     FROM ${hearts} WHERE ${counted}
     GROUP BY 1, 2
     ON CONFLICT (server_id, voter_identity) DO UPDATE SET last_counted_at = excluded.last_counted_at, last_day = excluded.last_day`,
    `INSERT INTO server_rankings (server_id, period, hearts)
     SELECT ${serverIdSql(server)}, to_char(${at}, 'YYYY-MM'), count(*)::int
     FROM ${hearts} WHERE ${counted}
     GROUP BY 1, 2
     ON CONFLICT (server_id, period) DO UPDATE SET hearts = server_rankings.hearts + excluded.hearts`,
    `WITH r AS (
       INSERT INTO referrals (id, server_id, referee_identity, referrer_identity, state, registered_at, qualified_at)
       SELECT ${rowIdSql(3)}, ${serverIdSql(server)}, 'referee-' || g, 'referrer-' || ${voter}, 'qualified', ${at}, ${at} + interval '1 hour'
       FROM ${clicks} AND g % 2 = 0
       RETURNING id, server_id, referrer_identity, qualified_at)
     INSERT INTO referral_credits (referral_id, server_id, referrer_identity, period, credited_at)
     SELECT id, server_id, referrer_identity, to_char(qualified_at, 'YYYY-MM'), qualified_at FROM r`,
    `INSERT INTO referral_clicks (id, server_id, referrer_identity, token, referral_id, ip, subnet, ip_key, subnet_key, user_agent, created_at)
     SELECT ${rowIdSql(4)}, ${serverIdSql(server)}, 'referrer-' || ${voter}, 'c' || g, CASE WHEN g % 2 = 0 THEN ${rowIdSql(3)} END,
            ${ip}, ${subnet}, ${pseudonym(ip)}, ${pseudonym(subnet)}, 'Mozilla/5.0 (Linux; Android 14) Mobile Safari/537.36', ${at}
     FROM ${clicks}`,
  ];
}
