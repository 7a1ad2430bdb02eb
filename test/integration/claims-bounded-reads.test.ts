/**
 * The claim API's reads stay bounded whatever one player's history (issue: the same cost on day 1,000 as on day 1).
 * A player has 20,000 ledger rows on the server from before the longest hold window (claimed and expired), and one
 * held heart inside it. A check (readStanding), a claim (claimOldestHeld) and CastHeart's expiry of the player's
 * older held hearts (expire_vote_claims) must read the rows that can still matter, not that history. Statements are
 * re-run under EXPLAIN ANALYZE (rolled back); the expiry runs inside a function, so its reads are the transaction's
 * table statistics instead.
 */
import anyTest, { type TestFn } from "ava";
import { create } from "@bufbuild/protobuf";
import { Prisma } from "../../gen/prisma/client.js";
import { PlayerIdKind, PlayerIdSchema } from "../../gen/proto/claims/v1/claims_pb.js";
import { toLedgerPlayer } from "../../services/claims/ledger-player.js";
import { claimOldestHeld, readStanding } from "../../services/claims/ledger-store.js";
import { executeSql, runSql, runSqlTransaction } from "../../services/shared/adapters/sql/executor.js";
import { recordingClient, rowsReadByStatements } from "../helpers/rows-read.js";
import { insertHeldClaim, insertOldLedgerRows } from "../helpers/skewed-history.js";
import { insertServer, startMeasuredHarness, type Harness, type MeasuredHarness } from "../../scripts/harness/delivery-harness.js";

const STEAM = "76561198012345678";
const HISTORY_ROWS = 20_000;
/** A handful: the held heart, its neighbours in the index, the server row. */
const FEW = 5;

const test = anyTest as TestFn<MeasuredHarness & { close(): Promise<void> }>;

test.before(async (t) => {
  t.context = await startMeasuredHarness("2026-05-10T12:00:00.000Z");
});
test.after.always(async (t) => {
  await t.context.close?.();
});

/** A server where the player has HISTORY_ROWS old ledger rows (claimed or expired, counted over 91 days ago) and one held heart from yesterday. */
async function serverWithHistory(h: Harness, at: Date): Promise<{ serverId: string; heldId: string }> {
  const serverId = await insertServer(h.db.prisma);
  await insertOldLedgerRows(h.db.prisma, serverId, STEAM, HISTORY_ROWS, at);
  const heldId = await insertHeldClaim(h.db.prisma, serverId, STEAM, at);
  await executeSql(h.db.prisma, Prisma.sql`ANALYZE vote_claims`);
  return { serverId, heldId };
}

const player = () => toLedgerPlayer(create(PlayerIdSchema, { kind: PlayerIdKind.STEAM_ID, value: STEAM }));

test.serial("a check by a player with 20,000 old ledger rows reads a handful of them, and still finds the held heart", async (t) => {
  const { h, clock, pool } = t.context;
  const { serverId, heldId } = await serverWithHistory(h, clock.now());
  const { client, statements } = recordingClient(pool);
  const standing = await readStanding(client, serverId, player(), clock.now());
  t.is(standing.kind === "held" ? standing.heart.heartId : standing.kind, heldId);
  t.is(statements().length, 1);
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.true((read.vote_claims ?? 0) <= FEW, `vote_claims rows read: ${read.vote_claims}`);
});

test.serial("a claim by a player with 20,000 old ledger rows reads a handful of them, and claims the held heart", async (t) => {
  const { h, clock, pool } = t.context;
  const { serverId, heldId } = await serverWithHistory(h, clock.now());
  const { client, statements } = recordingClient(pool);
  const claimed = await claimOldestHeld(client, serverId, player(), clock.now());
  t.is(claimed?.heartId, heldId);
  t.is(statements().length, 1);
  // Re-run (rolled back) after the claim: it finds nothing left to claim, through the same range of the index.
  const read = await rowsReadByStatements(h.db.prisma, statements());
  t.true((read.vote_claims ?? 0) <= FEW, `vote_claims rows read: ${read.vote_claims}`);
});

test.serial("CastHeart's expiry of the player's older held hearts reads the held ones, not the player's 20,000 claimed and expired rows", async (t) => {
  const { h, clock } = t.context;
  const { serverId } = await serverWithHistory(h, clock.now());
  // What the expiry may fetch: the held rows in the ledger (this server's one, and those the earlier tests' servers
  // left), the dead versions of rows those tests updated that its index still points at, and a handful: a few dozen
  // at most, never the player's 20,000 claimed and expired rows (the old code fetched 60,005). Loaded CI runs
  // fetched 7 and 8.
  const [held] = await runSql<{ n: bigint }>(h.db.prisma, Prisma.sql`SELECT count(*) AS n FROM vote_claims WHERE state = 'held'`);
  const bound = 4 * FEW + Number(held?.n ?? 0);
  const rolledBack = new Error("rolled back on purpose");
  let fetched = -1;
  try {
    await runSqlTransaction(
      h.db.prisma,
      async (tx) => {
        await tx.query(Prisma.sql`SELECT expire_vote_claims(${serverId}::uuid, ${`steam:${STEAM}`}, ${clock.now()}::timestamptz, 1, 20, '{}'::uuid[])`);
        const [stats] = await tx.query<{ fetched: bigint }>(
          Prisma.sql`SELECT coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) AS fetched FROM pg_stat_xact_user_tables WHERE relname = 'vote_claims'`,
        );
        fetched = Number(stats?.fetched ?? -1);
        throw rolledBack;
      },
      { timeoutMs: 60_000 },
    );
  } catch (error) {
    // Failure policy: the rollback is the point (the function writes); any other error fails the test.
    if (error !== rolledBack) throw error;
  }
  t.true(fetched >= 0 && fetched <= bound, `vote_claims rows read by the expiry: ${fetched} (bound ${bound})`);
});
