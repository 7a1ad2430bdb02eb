import pg from "pg";
import { Prisma } from "../../gen/prisma/client.js";
import type { PrismaClient } from "../shared/adapters/db.js";
import type { Logger } from "../shared/runtime/log.js";
import { runSql } from "../shared/adapters/sql/executor.js";
import { OUTBOX_COMMITTED_CHANNEL } from "../shared/adapters/outbox.js";

/** How long the start-up probe waits for its own notification before deciding notifications do not arrive. */
const PROBE_TIMEOUT_MS = 3_000;
/** Payload of the probe notification (the outbox trigger's own notifications carry an empty payload). */
const PROBE_PAYLOAD = "relay-probe";
/** Reconnection backoff after the listening connection is lost. */
const RECONNECT_MIN_MS = 200;
const RECONNECT_MAX_MS = 5_000;

/**
 * Listens for the outbox trigger's notifications (`pg_notify(OUTBOX_COMMITTED_CHANNEL, '')`, sent
 * by the transaction that writes outbox rows, at its commit; PostgreSQL folds the notifications of
 * one transaction into one) on a connection of its own, and calls `onCommit` for each.
 *
 * `active()` says whether notifications are known to arrive: true only after LISTEN succeeded AND
 * a probe notification sent through `prisma` (another connection) came back. The embedded PGlite
 * server hands a notification to the connection that committed, never to a listener, so there the
 * probe fails and the relay keeps polling at its fast interval (logged once). While the connection
 * is lost, `active()` is false until it is back (reconnection with backoff).
 */
export function createCommitListener(opts: { databaseUrl: string; prisma: PrismaClient; log: Logger; onCommit: () => void }) {
  const { databaseUrl, prisma, log, onCommit } = opts;
  let client: pg.Client | undefined;
  let active = false;
  let stopped = false;
  let failures = 0;
  let reconnectTimer: NodeJS.Timeout | undefined;
  let probeArrived: (() => void) | undefined;

  async function connect(): Promise<void> {
    const c = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 10_000 });
    client = c;
    let closed: (error: Error) => void = () => {};
    const connectionLost = new Promise<never>((_, reject) => {
      closed = reject;
    });
    connectionLost.catch(() => undefined);
    c.on("notification", (n) => {
      if (n.payload === PROBE_PAYLOAD) probeArrived?.();
      onCommit();
    });
    c.on("error", (error) => lost(c, error, closed));
    c.on("end", () => lost(c, new Error("connection ended"), closed));
    await c.connect();
    await c.query(`LISTEN ${OUTBOX_COMMITTED_CHANNEL}`);
    let timer: NodeJS.Timeout | undefined;
    const arrived = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), PROBE_TIMEOUT_MS);
      probeArrived = () => resolve(true);
    });
    try {
      await runSql(prisma, Prisma.sql`SELECT pg_notify(${OUTBOX_COMMITTED_CHANNEL}, ${PROBE_PAYLOAD})`);
      // A connection lost during the probe is an outage (retried), not a missing feature.
      if (!(await Promise.race([arrived, connectionLost]))) {
        // Failure policy: notifications never reach a listener here (embedded PGlite); give up on them for good and let the relay poll fast.
        log.warn({ probeTimeoutMs: PROBE_TIMEOUT_MS }, "the database does not deliver LISTEN notifications; the relay polls instead");
        client = undefined;
        await c.end().catch(() => undefined);
        return;
      }
    } finally {
      clearTimeout(timer);
      probeArrived = undefined;
    }
    if (stopped || client !== c) return;
    failures = 0;
    active = true;
    // Rows committed while nobody listened are found by this pass.
    onCommit();
  }

  /** The listening connection failed: while connecting, the attempt fails (and is retried); once active, reconnect. */
  function lost(c: pg.Client, error: Error, closed: (error: Error) => void): void {
    closed(error);
    if (client !== c) return;
    const wasActive = active;
    active = false;
    if (!wasActive || stopped) return;
    client = undefined;
    // Failure policy: the relay falls back to its fast poll while the listening connection is down; reconnect with backoff.
    log.warn({ err: error }, "lost the outbox notification connection; polling until it is back");
    c.end().catch(() => undefined);
    schedule();
  }

  function schedule(): void {
    failures++;
    const delay = Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** Math.min(failures - 1, 5));
    reconnectTimer = setTimeout(() => void attempt(), delay);
  }

  async function attempt(): Promise<void> {
    if (stopped) return;
    try {
      await connect();
    } catch (error) {
      // Failure policy: the database is unreachable or LISTEN failed; keep polling fast and retry with backoff.
      const c = client;
      client = undefined;
      active = false;
      await c?.end().catch(() => undefined);
      if (stopped) return;
      log.warn({ err: error, failures }, "could not listen for outbox notifications; retrying");
      schedule();
    }
  }

  return {
    /** Starts listening in the background (never throws; failures are retried and logged). */
    start(): void {
      stopped = false;
      void attempt();
    },
    /** True while notifications are known to arrive. */
    active: () => active,
    async stop(): Promise<void> {
      stopped = true;
      active = false;
      clearTimeout(reconnectTimer);
      const c = client;
      client = undefined;
      await c?.end().catch(() => undefined);
    },
  };
}
