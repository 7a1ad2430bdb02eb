/** Small helpers shared by the local Kafka broker's modules (see ../kafka.ts). */
const LOG_PREFIX = "kafka:";

export function log(message: string): void {
  process.stderr.write(`${LOG_PREFIX} ${message}\n`);
}

/** Resolves with `value` or with `undefined` after `ms`, without keeping a timer alive afterwards. */
export async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const timeout = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), ms);
    });
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
