import type { PrismaClient } from "../shared/db.js";
import type { LedgerPlayer } from "./ledger-player.js";

/** One ledger row as the answers report it. */
export interface LedgerHeart {
  heartId: string;
  countedAt: Date;
  expiresAt: Date;
  claimedAt: Date | null;
}

/** Where a player stands with a server: a held heart (the oldest), else a heart claimed within its window, else nothing. */
export type LedgerStanding = { kind: "held"; heart: LedgerHeart } | { kind: "claimed"; heart: LedgerHeart } | { kind: "none" };

interface Row {
  heart_id: string;
  state: "held" | "claimed";
  counted_at: Date;
  expires_at: Date;
  claimed_at: Date | null;
}

function toHeart(row: Row): LedgerHeart {
  return { heartId: row.heart_id, countedAt: row.counted_at, expiresAt: row.expires_at, claimedAt: row.claimed_at };
}

/**
 * The player's standing, in ONE indexed read (server, id kind): the oldest held heart inside its
 * window; else the latest claimed heart still inside its window; else none. A held heart past its
 * window counts as expired here, whether or not it was marked yet.
 */
export async function readStanding(prisma: PrismaClient, serverId: string, player: LedgerPlayer, now: Date): Promise<LedgerStanding> {
  const rows = await prisma.$queryRaw<Row[]>`
    SELECT c.heart_id::text AS heart_id, c.state::text AS state, c.counted_at, c.expires_at, c.claimed_at
    FROM vote_claims c
    WHERE c.server_id = ${serverId}::uuid AND ${player.match}
      AND c.state IN ('held', 'claimed') AND c.expires_at > ${now}::timestamptz
    ORDER BY c.state = 'held' DESC, CASE WHEN c.state = 'held' THEN c.counted_at END ASC, c.claimed_at DESC, c.counted_at DESC, c.heart_id
    LIMIT 1`;
  const row = rows[0];
  if (row === undefined) return { kind: "none" };
  return { kind: row.state, heart: toHeart(row) };
}

/**
 * Claims the player's OLDEST held heart inside its window, in one statement: the row is locked
 * (FOR UPDATE, waiting; never SKIP LOCKED) and changes only while still held, so of concurrent
 * claims exactly one takes a heart; a claim that waited for a heart taken meanwhile moves on to the
 * next held one, or takes none. Returns the claimed heart, or null.
 */
export async function claimOldestHeld(prisma: PrismaClient, serverId: string, player: LedgerPlayer, now: Date): Promise<LedgerHeart | null> {
  const rows = await prisma.$queryRaw<Row[]>`
    WITH target AS (
      SELECT c.heart_id FROM vote_claims c
      WHERE c.server_id = ${serverId}::uuid AND ${player.match}
        AND c.state = 'held' AND c.expires_at > ${now}::timestamptz
      ORDER BY c.counted_at, c.heart_id
      LIMIT 1
      FOR UPDATE
    )
    UPDATE vote_claims v SET state = 'claimed', claimed_at = ${now}::timestamptz
    FROM target t WHERE v.heart_id = t.heart_id AND v.state = 'held'
    RETURNING v.heart_id::text AS heart_id, v.state::text AS state, v.counted_at, v.expires_at, v.claimed_at`;
  const row = rows[0];
  return row === undefined ? null : toHeart(row);
}
