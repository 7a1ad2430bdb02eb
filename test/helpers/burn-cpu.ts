import { Worker } from "node:worker_threads";

/** Runs in each worker: spins until the shared flag is set or its time is up. */
const SPIN = `
const { workerData } = require("node:worker_threads");
const stop = new Int32Array(workerData.stop);
const end = Date.now() + workerData.maxMs;
while (Atomics.load(stop, 0) === 0 && Date.now() < end) for (let i = 0; i < 100000; i++);
`;

/**
 * Keeps `threads` CPU cores busy (worker threads spinning) until `stop()`, and never longer than `maxMs` (each
 * worker ends itself then), so a race test runs on a loaded machine as it does in CI. `stop()` resolves once every
 * worker has exited.
 */
export function burnCpu(threads: number, maxMs: number): { stop(): Promise<void> } {
  const stop = new SharedArrayBuffer(4);
  const workers = Array.from({ length: threads }, () => new Worker(SPIN, { eval: true, workerData: { stop, maxMs } }));
  const exited = workers.map((w) => new Promise<void>((resolve) => w.once("exit", () => resolve())));
  return {
    async stop() {
      Atomics.store(new Int32Array(stop), 0, 1);
      await Promise.all(exited);
    },
  };
}
