import type { PrismaClient } from "../shared/db.js";
import type { Logger } from "../shared/log.js";
import { recordAttempts, type AttemptRecord } from "./store.js";

/** Attempts recorded by one statement at most. */
export const MAX_RECORD_BATCH = 500;

/** Records attempts in groups: group commit for the dispatcher. */
export interface AttemptRecorder {
  /** Records one attempt with the next group; resolves with whether the lease was still held. */
  record(attempt: AttemptRecord): Promise<boolean>;
  /** Attempts waiting for their group or being written now. */
  pending(): number;
}

interface Waiting {
  attempt: AttemptRecord;
  resolve(owned: boolean): void;
  reject(error: unknown): void;
}

/**
 * Group commit of attempt records: attempts finishing while a group is being written wait for
 * the next one, and each group is written by recordAttempts (one statement for the routine
 * results). Nobody waits for a timer: a lone attempt is written at once, so an idle dispatcher
 * records as quickly as before, and a busy one writes one statement per group instead of a
 * transaction per attempt. A group never waits for a receiver, only for the database.
 */
export function createAttemptRecorder(opts: { prisma: PrismaClient; log?: Logger; maxBatch?: number }): AttemptRecorder {
  const maxBatch = opts.maxBatch ?? MAX_RECORD_BATCH;
  let queue: Waiting[] = [];
  let writing = 0;
  /** True while flush() runs; set and cleared synchronously, so no record is left without a writer. */
  let flushing = false;

  const flush = async (): Promise<void> => {
    flushing = true;
    while (queue.length > 0) {
      const group = queue.slice(0, maxBatch);
      queue = queue.slice(group.length);
      writing = group.length;
      try {
        const outcomes = await recordAttempts(
          opts.prisma,
          group.map((w) => w.attempt),
          opts.log,
        );
        group.forEach((w, i) => {
          const outcome = outcomes[i];
          if (outcome?.kind === "recorded") w.resolve(outcome.owned);
          else w.reject(outcome?.error ?? new Error("attempt not recorded"));
        });
      } catch (error) {
        // Failure policy: the caller logs it; the leases expire and the deliveries are claimed again (at least once).
        for (const w of group) w.reject(error);
      } finally {
        writing = 0;
      }
    }
    flushing = false;
  };

  return {
    record(attempt) {
      return new Promise<boolean>((resolve, reject) => {
        queue.push({ attempt, resolve, reject });
        if (!flushing) void flush();
      });
    },
    pending: () => queue.length + writing,
  };
}
