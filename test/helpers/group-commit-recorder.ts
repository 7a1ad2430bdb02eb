import type { ItemOutcome } from "../../services/shared/runtime/group-commit.js";

/** The overload error the group-commit tests give their queues (it carries the retry hint). */
export class Busy extends Error {
  constructor(readonly retryAfterMs: number) {
    super("busy");
  }
}

/** A batch body that records its batches and answers each item by `answer`, after `gate` opens. */
export function recorder<I>(answer: (item: I) => ItemOutcome<string>) {
  const batches: I[][] = [];
  let open: () => void = () => {};
  let gate = Promise.resolve();
  return {
    batches,
    hold() {
      gate = new Promise<void>((resolve) => (open = resolve));
    },
    release: () => open(),
    async runBatch(items: readonly I[]): Promise<ItemOutcome<string>[]> {
      batches.push([...items]);
      await gate;
      return items.map(answer);
    },
  };
}
