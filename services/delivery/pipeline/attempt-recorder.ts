import type { PrismaClient } from "../../shared/adapters/db.js";
import { createGroupCommit } from "../../shared/runtime/group-commit.js";
import type { Logger } from "../../shared/runtime/log.js";
import { recordAttempts, type AttemptRecord } from "./attempt-log.js";

/** Attempts recorded by one statement at most. */
export const MAX_RECORD_BATCH = 500;
/**
 * Attempts waiting to be recorded at most; the dispatcher stops claiming well before (it pauses
 * while a few per concurrency slot wait), so this is a backstop, never a normal answer.
 */
const MAX_WAITING_RECORDS = 100_000;

/** Records attempts in groups: group commit for the dispatcher. */
export interface AttemptRecorder {
  /** Records one attempt with the next group; resolves with whether the lease was still held. */
  record(attempt: AttemptRecord): Promise<boolean>;
  /** Attempts waiting for their group. */
  pending(): number;
}

/**
 * Group commit of attempt records (services/shared/runtime/group-commit.ts): attempts finishing while a
 * group is being written form the next one, and each group is written by recordAttempts (one
 * statement for the routine results, per-record outcomes). A lone attempt is written at once, so
 * an idle dispatcher records as quickly as before; a group waits for the database, never for a
 * receiver. Two attempts of one delivery never share a group.
 */
export function createAttemptRecorder(opts: { prisma: PrismaClient; log?: Logger; maxBatch?: number }): AttemptRecorder {
  const queue = createGroupCommit<AttemptRecord, boolean>({
    maxBatch: opts.maxBatch ?? MAX_RECORD_BATCH,
    maxQueue: MAX_WAITING_RECORDS,
    keysOf: (attempt) => [attempt.delivery.id],
    // Failure policy: refused, the attempt is not recorded; the caller logs it and the lease expires, so it is attempted again.
    overloaded: (retryAfterMs) => new Error(`too many attempts wait to be recorded; retry in ${retryAfterMs} ms`),
    async runBatch(attempts) {
      const outcomes = await recordAttempts(opts.prisma, [...attempts], opts.log);
      return outcomes.map((o) => (o.kind === "recorded" ? { ok: true, value: o.owned } : { ok: false, error: o.error }));
    },
  });
  return {
    record: (attempt) => queue.submit(attempt),
    pending: () => queue.stats().queued,
  };
}
