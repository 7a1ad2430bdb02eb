import { Prisma } from "../../../gen/prisma/client.js";
import type { PrismaClient } from "../../shared/adapters/db.js";
import type { Logger } from "../../shared/runtime/log.js";
import { runSql } from "../../shared/adapters/sql/executor.js";
import { withdrawVoteClaimsSql } from "../../claims/write-vote-claims.js";
import type { PayoutTransport, WithdrawOthers } from "../../payouts/write-payouts.js";
import type { AttemptExchange } from "./attempt-exchange.js";
import { insertAttemptsSql, toAttemptRow } from "./attempt-log.js";
import { withdrawDeliveriesSql, type HeldDelivery } from "./write-deliveries.js";

/**
 * Pay-once mode: once a transport has paid a heart, the heart is withdrawn from the others. Its waiting
 * deliveries become `withdrawn` (each with an attempt row saying why) and its held ledger row `withdrawn`.
 */

/** What the attempt log shows as the target of a withdrawn delivery that was never sent. */
export const WITHDRAWN_TARGET = "pay-once";

/** The error text of a delivery withdrawn because another transport paid its heart first, around the transport's name. */
const WITHDRAWN_TEXT = ["not sent: the heart was paid by ", " first (pay-once mode)"] as const;

/** The error text of a delivery withdrawn because another transport paid its heart first. */
export function withdrawnText(paidBy: string): string {
  return `${WITHDRAWN_TEXT[0]}${paidBy}${WITHDRAWN_TEXT[1]}`;
}

/** withdrawnText in SQL, for a transport name the statement reads (`paidBy`, a text expression). */
export function withdrawnTextSql(paidBy: Prisma.Sql): Prisma.Sql {
  return Prisma.sql`(${WITHDRAWN_TEXT[0]}::text || ${paidBy} || ${WITHDRAWN_TEXT[1]}::text)`;
}

/** The attempt row of a withdrawn delivery: nothing sent, the reason as its error. */
function withdrawnExchange(reason: string): AttemptExchange {
  return { target: WITHDRAWN_TARGET, request: { headers: {}, body: "" }, response: null, latencyMs: 0, error: reason, succeeded: false };
}

/**
 * Withdraws waiting deliveries of hearts in ONE statement, each with an attempt row saying why: `only` the
 * given leased one (its lease must still be held), or every pending delivery of the hearts that is not leased
 * (one leased now is in flight, the payer's own push included: it settles or withdraws itself). `ledger`:
 * the same statement marks the hearts' held ledger rows `withdrawn`.
 */
export async function withdrawDeliveries(
  prisma: PrismaClient,
  q: { serverId: string; heartIds: string[]; now: Date; reason: string; only?: HeldDelivery; ledger?: boolean },
): Promise<void> {
  const attempt = toAttemptRow(0, "w", q.now, withdrawnExchange(q.reason));
  await runSql(
    prisma,
    Prisma.sql`
    WITH ended AS (
      ${withdrawDeliveriesSql(q)}
    ), logged AS (
      ${insertAttemptsSql([attempt], Prisma.sql`(SELECT 'w'::text AS key, e.id AS delivery_id, e.server_id FROM ended e)`)}
    ), ledger AS (
      ${withdrawVoteClaimsSql({ serverId: q.serverId, heartIds: q.heartIds, enabled: q.ledger === true })}
    )
    SELECT (SELECT count(*) FROM ended)::int AS deliveries, (SELECT count(*) FROM ledger)::int AS ledger`,
  );
}

/**
 * After a transport paid hearts (its payout rows committed), ONE statement: each heart's ledger row, still
 * held, becomes `withdrawn` (unless the ledger claim paid it: it is `claimed`), and its other waiting
 * deliveries are withdrawn with an attempt row each. It runs after the paying statement, never inside it,
 * so no statement holds a payout row while it waits for a ledger row (a ledger claim holds its ledger row
 * while it takes the payout): the order of locks never crosses.
 */
export const withdrawOthers: WithdrawOthers = async (
  prisma: PrismaClient,
  q: { serverId: string; heartIds: string[]; paidBy: PayoutTransport; now: Date },
  log?: Logger,
): Promise<void> => {
  if (q.heartIds.length === 0) return;
  try {
    await withdrawDeliveries(prisma, { serverId: q.serverId, heartIds: q.heartIds, now: q.now, reason: withdrawnText(q.paidBy), ledger: q.paidBy !== "claim" });
  } catch (error) {
    // Failure policy: the payer has paid (its payout row is committed), which alone keeps every other transport from paying
    // (a push withdraws itself when it reserves, a claim answers 2, the pull list leaves the heart out); only the eager
    // marking is lost, so the paying call still succeeds.
    log?.warn({ err: error, heartIds: q.heartIds }, "pay-once: withdrawing the other deliveries failed");
  }
};
