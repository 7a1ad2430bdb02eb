import type { PrismaClient } from "../shared/adapters/db.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { Prisma } from "../../gen/prisma/client.js";
import type { LedgerPlayer } from "./ledger-player.js";
import { payableSql, takeClaimPayoutSql } from "../payouts/write-payouts.js";
import { claimVoteClaimSql } from "./write-vote-claims.js";
import { CLAIM_HOLD_DAYS } from "../servers/claim-settings.js";

/** One ledger row as the answers report it. */
export interface LedgerHeart {
  heartId: string;
  countedAt: Date;
  expiresAt: Date;
  claimedAt: Date | null;
}

/**
 * Where a player stands with a server: a held heart (the oldest); else, by the player's latest payout
 * inside its window: a heart this claim API claimed, a heart another transport paid (pay-once mode),
 * or a heart a push is paying right now (reserved, its delivery still pending); else nothing.
 */
export type LedgerStanding =
  | { kind: "held"; heart: LedgerHeart }
  | { kind: "claimed"; heart: LedgerHeart }
  | { kind: "paid_elsewhere"; heart: LedgerHeart }
  | { kind: "push_in_flight"; heart: LedgerHeart }
  | { kind: "none" };

interface Row {
  heart_id: string;
  state: "held" | "claimed" | "paid_elsewhere" | "push_in_flight";
  counted_at: Date;
  expires_at: Date;
  claimed_at: Date | null;
}

/**
 * A ledger row `c` still inside its hold window at `now`. The second condition says nothing more (a row's window is
 * at most CLAIM_HOLD_DAYS.max days from its count) but lets the (id kind, server, counted_at) index start at the
 * longest window: a check or claim reads the player's rows of the last CLAIM_HOLD_DAYS.max days (one per day per
 * voter identity of the player), never the years of claimed and expired rows before them.
 */
function inHoldWindowSql(now: Date): Prisma.Sql {
  return Prisma.sql`c.expires_at > ${now}::timestamptz AND c.counted_at > ${now}::timestamptz - make_interval(days => ${CLAIM_HOLD_DAYS.max}::int)`;
}

function toHeart(row: Row): LedgerHeart {
  return { heartId: row.heart_id, countedAt: row.counted_at, expiresAt: row.expires_at, claimedAt: row.claimed_at };
}

/**
 * The player's standing, in ONE indexed read (id kind, server, counted_at; at most the player's ledger rows
 * of the longest hold window, LIMIT 1: inHoldWindowSql): the oldest held heart inside its window that no transport has taken; else
 * the heart whose payout is the player's LATEST (its time: the ledger claim's, else the payout's paid or
 * taken time). A held heart past its window counts as expired here, whether or not it was marked yet.
 *
 * Pay-once mode (issue: a plugin's retry rule met another transport's payment): `claimed` (the plugins'
 * 2) is answered only when that latest payout is this claim API's own claim, because EasyVoteExtended
 * 3.2.x pays on a 2 after an earlier claim of its own failed in doubt ("your claim went through"). A
 * latest payout by another transport (HTTP callback, Votifier, pull) is `paid_elsewhere`, and one a push
 * holds while its delivery is still pending (in flight, or retried after an attempt in doubt) is
 * `push_in_flight`: neither may ever read as a 2. A reservation whose delivery is no longer pending
 * (ended in doubt) counts as paid elsewhere: it is never paid again.
 */
export async function readStanding(prisma: PrismaClient, serverId: string, player: LedgerPlayer, now: Date): Promise<LedgerStanding> {
  // A held heart is offered only while still payable (services/payouts/write-payouts.ts).
  const offered = Prisma.sql`(c.state = 'held' AND ${payableSql(Prisma.sql`c.heart_id`)})`;
  const rows = await runSql<Row>(
    prisma,
    Prisma.sql`
    SELECT c.heart_id::text AS heart_id,
           CASE WHEN ${offered} THEN 'held'
                WHEN c.state = 'claimed' THEN 'claimed'
                WHEN p.state <> 'paid' AND d.status = 'pending' THEN 'push_in_flight'
                ELSE 'paid_elsewhere' END AS state,
           c.counted_at, c.expires_at, coalesce(c.claimed_at, p.paid_at, p.taken_at) AS claimed_at
    FROM vote_claims c
    LEFT JOIN heart_payouts p ON p.heart_id = c.heart_id
    LEFT JOIN deliveries d ON d.id = p.delivery_id
    WHERE c.server_id = ${serverId}::uuid AND ${player.match}
      AND c.state IN ('held', 'claimed', 'withdrawn') AND ${inHoldWindowSql(now)}
    ORDER BY ${offered} DESC, CASE WHEN ${offered} THEN c.counted_at END ASC,
             coalesce(c.claimed_at, p.paid_at, p.taken_at) DESC NULLS LAST, c.counted_at DESC, c.heart_id
    LIMIT 1`,
  );
  const row = rows[0];
  if (row === undefined) return { kind: "none" };
  return { kind: row.state, heart: toHeart(row) };
}

/**
 * Claims the player's OLDEST held heart inside its window, in one statement (reading at most the player's ledger
 * rows of the longest hold window: inHoldWindowSql): the row is locked
 * (FOR UPDATE, waiting; never SKIP LOCKED) and changes only while still held, so of concurrent
 * claims exactly one takes a heart; a claim that waited for a heart taken meanwhile moves on to the
 * next held one, or takes none. Pay-once mode (`s.pay_once`): a heart with a payout row is not a
 * candidate, and the claim takes the heart's payout in the same statement (takeClaimPayoutSql, first
 * come); when another transport took it first, nothing is claimed. Returns the claimed heart, or null.
 */
export async function claimOldestHeld(
  prisma: PrismaClient,
  serverId: string,
  player: LedgerPlayer,
  now: Date,
): Promise<(LedgerHeart & { payOnce: boolean }) | null> {
  const rows = await runSql<Row & { pay_once: boolean }>(
    prisma,
    Prisma.sql`
    WITH target AS (
      SELECT c.heart_id, s.pay_once FROM vote_claims c JOIN servers s ON s.id = c.server_id
      WHERE c.server_id = ${serverId}::uuid AND ${player.match}
        AND c.state = 'held' AND ${inHoldWindowSql(now)}
        AND ${payableSql(Prisma.sql`c.heart_id`)}
      ORDER BY c.counted_at, c.heart_id
      LIMIT 1
      FOR UPDATE OF c
    ), paid AS (
      ${takeClaimPayoutSql(serverId, now)}
    )
    ${claimVoteClaimSql(Prisma.sql`target`, now, Prisma.sql`(NOT t.pay_once OR t.heart_id IN (SELECT heart_id FROM paid))`, Prisma.sql`t.pay_once`)}`,
  );
  const row = rows[0];
  return row === undefined ? null : { ...toHeart(row), payOnce: row.pay_once };
}
