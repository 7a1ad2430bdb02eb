/**
 * The hot statements keep index-led plans on a database whose statistics are skewed (issue: the same cost on day
 * 1,000 as on day 1). One server holds most rows of every table and one carrier-grade NAT address most of its
 * hearts and clicks; ANALYZE has shown the planner that skew. Each statement is recorded from its owner module as it
 * runs for the hot keys, then planned again with the same parameters (EXPLAIN, not run): no big table may be read
 * by a sequential scan, and each statement reads through the indexes its bound rests on.
 */
import anyTest, { type TestFn } from "ava";
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { Prisma } from "../../gen/prisma/client.js";
import { PlayerIdKind, PlayerIdSchema } from "../../gen/proto/claims/v1/claims_pb.js";
import { toLedgerPlayer } from "../../services/claims/ledger-player.js";
import { claimOldestHeld, readStanding } from "../../services/claims/ledger-store.js";
import { runAlertScan } from "../../services/alerts/scan-alert-causes.js";
import { claimDigestSql } from "../../services/alerts/alert-store.js";
import { claimDueDeliveries } from "../../services/delivery/pipeline/claim-deliveries.js";
import { insertAndLeaseDeliveries } from "../../services/delivery/pipeline/insert-deliveries.js";
import { castHeartBatch } from "../../services/hearts/cast-heart-batch.js";
import { DEFAULT_FRAUD_RULES } from "../../services/hearts/domain/fraud-rules.js";
import { toVoterAddress } from "../../services/hearts/domain/ip.js";
import { applyEventBatch } from "../../services/referral/apply-event.js";
import { toApplyEventCommand } from "../../services/referral/domain/commands.js";
import { executeSql, runSql, runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { fenceIndexLedPlans } from "../../services/shared/adapters/sql/planner-fence.js";
import { planScansOf, recordingClient, rowsReadByStatements, type PlanScan } from "../helpers/rows-read.js";
import {
  insertAddressClicks,
  insertAddressHearts,
  insertAddressVoters,
  dispatcherRoomAt,
  insertDeliveredCallbacks,
  insertHeldClaim,
  insertLinkedReferrals,
  insertOldLedgerRows,
} from "../helpers/skewed-history.js";
import { defaultEndpoint, insertSecret, insertServer, startMeasuredHarness, type MeasuredHarness } from "../../scripts/harness/delivery-harness.js";

const HOT_ADDRESS = "100.64.0.7";
const HOT_SUBNET = "100.64.0.0/24";
const STEAM = "76561198012345678";
const HISTORY_ROWS = 20_000;
/** The tables a hot statement must never read by a sequential scan: each grows with the history. */
const BIG_TABLES = [
  "hearts",
  "heart_address_voters",
  "referral_clicks",
  "referrals",
  "referral_events",
  "referral_credits",
  "vote_claims",
  "deliveries",
  "delivery_attempts",
];

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void>; serverId: string }>;

test.before(async (t) => {
  const measured = await startMeasuredHarness("2026-05-10T12:00:00.000Z");
  const { h, clock } = measured;
  const at = clock.now();
  const serverId = await insertServer(h.db.prisma, { callbackUrl: "http://127.0.0.1:9/callback" });
  await insertSecret(h.db.prisma, h.deps.secretBox, serverId, "callback");
  await h.db.prisma.server.update({ where: { id: serverId }, data: { referralReviewMode: "loose" } });
  const hot = { serverId, ip: HOT_ADDRESS, subnet: HOT_SUBNET, rows: HISTORY_ROWS, at, spreadSeconds: 50 };
  await insertAddressHearts(h.db.prisma, hot, "2026-05");
  await insertAddressVoters(h.db.prisma, serverId);
  await insertAddressClicks(h.db.prisma, hot);
  await insertLinkedReferrals(h.db.prisma, hot, "alice");
  await insertOldLedgerRows(h.db.prisma, serverId, STEAM, HISTORY_ROWS, at);
  await insertDeliveredCallbacks(h.db.prisma, serverId, (await defaultEndpoint(h.db.prisma, serverId)).id, HISTORY_ROWS, at);
  // A few quiet servers and addresses beside them, so the hot ones are the skew of the statistics, not all of them.
  for (let n = 1; n <= 3; n++) {
    const quiet = { serverId: await insertServer(h.db.prisma), ip: `192.0.2.${n}`, subnet: "192.0.2.0/24", rows: 100, at, spreadSeconds: 3600 };
    await insertAddressHearts(h.db.prisma, quiet, "2026-05");
    await insertAddressVoters(h.db.prisma, quiet.serverId);
    await insertAddressClicks(h.db.prisma, quiet);
  }
  await executeSql(h.db.prisma, Prisma.sql`ANALYZE`);
  t.context = { ...measured, serverId };
});
test.after.always(async (t) => {
  await t.context.close?.();
});

/**
 * Asserts that no big table is read by a sequential scan, that every index in `expected` is read, and that no table
 * in `stopsEarly` is read by a bitmap scan: a read under a LIMIT stops early only when it walks an index in order,
 * while a bitmap scan collects every matching entry first.
 */
function assertIndexLed(
  t: { true(value: boolean, message: string): void; log(...values: unknown[]): void },
  scans: PlanScan[],
  expected: string[],
  stopsEarly: string[] = [],
) {
  t.log(scans.map((s) => `${s.nodeType} ${s.table ?? ""} ${s.index ?? ""}`.trim()));
  for (const s of scans) t.true(s.nodeType !== "Seq Scan" || !BIG_TABLES.includes(s.table ?? ""), `sequential scan of ${s.table}`);
  for (const s of scans) t.true(s.nodeType !== "Bitmap Heap Scan" || !stopsEarly.includes(s.table ?? ""), `bitmap scan of ${s.table}`);
  const used = new Set(scans.map((s) => s.index));
  for (const index of expected) t.true(used.has(index), `reads through ${index}`);
}

test.serial(
  "CastHeart's read for a carrier-grade NAT address with 20,000 voters is index-led: the address-voter set and the (ip, created_at) index",
  async (t) => {
    const { h, clock, pool, serverId } = t.context;
    const { client, statements } = recordingClient(pool);
    await castHeartBatch({ ...h.deps, prisma: client }, DEFAULT_FRAUD_RULES, [
      { serverId, voterIdentity: "newcomer", username: "Newcomer", userAgent: "ua", address: toVoterAddress(HOT_ADDRESS)!, at: clock.now() },
    ]);
    assertIndexLed(t, await planScansOf(h.db.prisma, statements()[0]!), [
      "heart_address_voters_server_id_address_last_counted_at_idx",
      "hearts_ip_created_at_idx",
    ]);
  },
);

test.serial(
  "ApplyEvent's reads for a click from an address with 20,000 clicks and 20,000 linked referrals are index-led: the token, then the linked-click indexes",
  async (t) => {
    const { h, clock, pool, serverId } = t.context;
    await executeSql(
      h.db.prisma,
      Prisma.sql`INSERT INTO referral_clicks (id, server_id, referrer_identity, token, ip, subnet, user_agent, created_at)
                 VALUES (gen_random_uuid(), ${serverId}::uuid, 'alice', 'plan-token', ${HOT_ADDRESS}, ${HOT_SUBNET}, 'ua', ${clock.now()}::timestamptz)`,
    );
    const { client, statements } = recordingClient(pool);
    const [outcome] = await applyEventBatch({ ...h.deps, prisma: client }, [
      toApplyEventCommand({ serverId, event: "registered", token: "plan-token", serverEventId: "reg-plan", refereeIdentity: "dave", ts: 0n, kid: "k1" }),
    ]);
    t.true(outcome?.ok, "registered");
    // Read + dedup, the planner fence (services/shared/adapters/sql/planner-fence.ts), the anti-abuse facts: their plan is
    // checked here as the planner makes it without the fence, which only takes the other plans away.
    const [read, fence, facts] = statements();
    t.regex(fence!.text, /planner-fence/);
    assertIndexLed(t, await planScansOf(h.db.prisma, read!), ["referral_clicks_token_key"]);
    assertIndexLed(
      t,
      await planScansOf(h.db.prisma, facts!),
      ["referral_clicks_linked_ip_idx", "referral_clicks_linked_subnet_idx", "referral_clicks_server_id_ip_created_at_idx"],
      ["referral_clicks"],
    );
  },
);

test.serial(
  "a check and a claim by a player with 20,000 old ledger rows are index-led: the player's (id, server, counted_at) index, the held rows' partial index",
  async (t) => {
    const { h, clock, pool, serverId } = t.context;
    await insertHeldClaim(h.db.prisma, serverId, STEAM, clock.now());
    const player = toLedgerPlayer(create(PlayerIdSchema, { kind: PlayerIdKind.STEAM_ID, value: STEAM }));
    const check = recordingClient(pool);
    await readStanding(check.client, serverId, player, clock.now());
    const claim = recordingClient(pool);
    t.truthy(await claimOldestHeld(claim.client, serverId, player, clock.now()), "the held heart is claimed");
    assertIndexLed(t, await planScansOf(h.db.prisma, check.statements()[0]!), ["vote_claims_steam_id_idx"], ["vote_claims"]);
    assertIndexLed(t, await planScansOf(h.db.prisma, claim.statements()[0]!), ["vote_claims_held_player_idx"], ["vote_claims"]);
  },
);

test.serial(
  "the dispatcher's claim beside a server's 20,000 delivered deliveries is index-led: the partial index of the unparked pending pushed rows",
  async (t) => {
    const { h, clock, pool } = t.context;
    const at = clock.now();
    const { client, statements } = recordingClient(pool);
    await claimDueDeliveries(client, dispatcherRoomAt(at));
    assertIndexLed(t, await planScansOf(h.db.prisma, statements()[0]!), ["deliveries_claimable_next_attempt_at_idx"], ["deliveries"]);
  },
);

test.serial(
  "beside 2,000 other servers, CastHeart's read and write and the consumer's insert look a batch's servers and endpoints up by key, never reading every server",
  async (t) => {
    const { h, clock, pool, serverId } = t.context;
    // Servers with their default endpoints (a trigger makes one per server): a list's servers, not a history's rows.
    await executeSql(
      h.db.prisma,
      Prisma.sql`INSERT INTO servers (id, name, created_at) SELECT gen_random_uuid(), 'Quiet server ' || g, ${clock.now()}::timestamptz FROM generate_series(1, 2000) AS g`,
    );
    await executeSql(h.db.prisma, Prisma.sql`ANALYZE servers`);
    await executeSql(h.db.prisma, Prisma.sql`ANALYZE callback_endpoints`);
    const cast = recordingClient(pool);
    await castHeartBatch({ ...h.deps, prisma: cast.client }, DEFAULT_FRAUD_RULES, [
      { serverId, voterIdentity: "keyed", username: "Keyed", userAgent: "ua", address: toVoterAddress("198.51.100.20")!, at: clock.now() },
    ]);
    const insert = recordingClient(pool);
    await insertAndLeaseDeliveries(
      insert.client,
      [
        {
          heartId: randomUUID(),
          serverId,
          eventType: "heart.counted",
          username: "Keyed",
          voterIdentity: "keyed",
          period: "2026-05",
          streakDay: null,
          countedAt: clock.now(),
        },
      ],
      dispatcherRoomAt(clock.now()),
    );
    const statements = [...cast.statements(), ...insert.statements()];
    t.true(statements.length >= 3, "the read, the write and the insert were recorded");
    for (const statement of statements) {
      const scans = await planScansOf(h.db.prisma, statement);
      const what = (statement as unknown as { text: string }).text.replace(/\s+/g, " ").slice(0, 60);
      for (const s of scans)
        t.true(s.nodeType !== "Seq Scan" || !["servers", "callback_endpoints"].includes(s.table ?? ""), `sequential scan of ${s.table} in ${what}`);
    }
  },
);

test.serial(
  "a digest's claim of one owner's 3 waiting alerts reads those, not the 20,000 other owners' waiting alerts nor the owner's 20,000 sent ones",
  async (t) => {
    const { h, clock, pool, serverId } = t.context;
    const at = clock.now();
    const owner = `digest-owner-${randomUUID()}`;
    // Other owners' alerts waiting (a list-wide outage), and this owner's long history of alerts already sent.
    await executeSql(
      h.db.prisma,
      Prisma.sql`INSERT INTO owner_alerts (id, owner_id, server_id, kind, cause_key, title, detail, link, created_at, send_after)
        SELECT gen_random_uuid(), 'other-' || (g % 5000), ${serverId}::uuid, 'endpoint_disabled', 'other:' || g || ':' || ${owner}, 't', 'd', '/',
               ${at}::timestamptz - g * interval '1 second', ${at}::timestamptz - g * interval '1 second'
        FROM generate_series(1, ${HISTORY_ROWS}::int) g`,
    );
    await executeSql(
      h.db.prisma,
      Prisma.sql`INSERT INTO owner_alerts (id, owner_id, server_id, kind, cause_key, title, detail, link, created_at, send_after)
        SELECT gen_random_uuid(), ${owner}, ${serverId}::uuid, 'endpoint_disabled', 'sent:' || g || ':' || ${owner}, 't', 'd', '/',
               ${at}::timestamptz - interval '1 day' - g * interval '1 second', CASE WHEN g <= 3 THEN ${at}::timestamptz - g * interval '1 second' END
        FROM generate_series(1, ${HISTORY_ROWS}::int) g`,
    );
    await executeSql(h.db.prisma, Prisma.sql`ANALYZE owner_alerts`);
    // As the digest pass claims: the fence, then the claim, in one transaction (the helper replays the fence).
    const { client, statements } = recordingClient(pool);
    const claimed = await runSqlTransaction(
      client,
      async (tx) => tx.query(claimDigestSql(owner, at, new Date(at.getTime() + 60_000), 1_000, await fenceIndexLedPlans(tx))),
      { timeoutMs: 10_000 },
    );
    t.is(claimed.length, 3, "the owner's 3 waiting alerts");
    // Measured on the state before the claim: the 3 wait again.
    await executeSql(h.db.prisma, Prisma.sql`UPDATE owner_alerts SET send_after = created_at WHERE owner_id = ${owner} AND send_after > ${at}::timestamptz`);
    const read = await rowsReadByStatements(h.db.prisma, statements());
    t.log(read);
    // Each claimed alert read a few times (the index walk, its lock, its update by key): never the other alerts.
    t.true((read.owner_alerts ?? 0) <= 4 * 3, `owner_alerts rows read: ${read.owner_alerts}`);
  },
);

test.serial(
  "the owner alerts' scan beside a server's 20,000 callback attempts finds the last failed delivery index-led: (server_id, started_at) by equality, its delivery by key",
  async (t) => {
    const { h, clock, pool, serverId } = t.context;
    const at = clock.now();
    const endpointId = (await defaultEndpoint(h.db.prisma, serverId)).id;
    const ownerId = `plan-owner-${randomUUID()}`;
    await executeSql(h.db.prisma, Prisma.sql`INSERT INTO owners (id, display_name) VALUES (${ownerId}, 'Plan owner')`);
    await executeSql(h.db.prisma, Prisma.sql`UPDATE servers SET owner_id = ${ownerId} WHERE id = ${serverId}::uuid`);
    // One attempt per delivered callback of the history (one a minute back from now); the newest one failed.
    await executeSql(
      h.db.prisma,
      Prisma.sql`INSERT INTO delivery_attempts (delivery_id, server_id, attempt, url, started_at, latency_ms, succeeded)
                 SELECT d.id, d.server_id, 1, 'http://127.0.0.1:9/callback', d.created_at, 3, true
                 FROM deliveries d WHERE d.server_id = ${serverId}::uuid AND d.endpoint_id = ${endpointId}::uuid`,
    );
    const [last] = await runSql<{ delivery_id: string; started_at: Date }>(
      h.db.prisma,
      Prisma.sql`UPDATE delivery_attempts SET succeeded = false
                 WHERE id = (SELECT id FROM delivery_attempts WHERE server_id = ${serverId}::uuid ORDER BY started_at DESC LIMIT 1)
                 RETURNING delivery_id::text, started_at`,
    );
    await executeSql(
      h.db.prisma,
      Prisma.sql`INSERT INTO callback_health (endpoint_id, server_id, failing_since, last_failure_at, last_failure_reason)
                 VALUES (${endpointId}::uuid, ${serverId}::uuid, ${new Date(at.getTime() - 30 * 60 * 60 * 1000)}::timestamptz, ${last!.started_at}::timestamptz, 'receiver answered 503')
                 ON CONFLICT (endpoint_id) DO UPDATE SET failing_since = EXCLUDED.failing_since, last_failure_at = EXCLUDED.last_failure_at`,
    );
    await executeSql(h.db.prisma, Prisma.sql`ANALYZE delivery_attempts`);
    await executeSql(h.db.prisma, Prisma.sql`ANALYZE callback_health`);
    const { client, statements } = recordingClient(pool);
    t.like(await runAlertScan({ db: client, batchRows: 100 }, at), { failing: 1 });
    assertIndexLed(
      t,
      await planScansOf(h.db.prisma, statements()[0]!),
      // callback_health holds one row per endpoint (a few here): its failing_since range is the planner's choice.
      ["delivery_attempts_server_id_started_at_idx", "deliveries_pkey"],
      ["delivery_attempts"],
    );
    const [alert] = await runSql<{ link: string }>(
      h.db.prisma,
      Prisma.sql`SELECT link FROM owner_alerts WHERE server_id = ${serverId}::uuid AND kind = 'endpoint_failing'`,
    );
    t.true(alert?.link.includes(`&delivery=${last!.delivery_id}`), "the alert links the last failed delivery");
  },
);
