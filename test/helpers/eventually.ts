/**
 * Polls `check` until it returns a value other than undefined/false (or stops
 * throwing), or the timeout passes. Tests await asynchronous outcomes with it,
 * never with fixed sleeps.
 */
export async function eventually<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  opts: { timeoutMs?: number; intervalMs?: number; message?: string } = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const intervalMs = opts.intervalMs ?? 50;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
      lastError = undefined;
    } catch (error) {
      // Failure policy: a throwing check counts as "not yet"; the last error is reported on timeout.
      lastError = error;
    }
    if (Date.now() > deadline) {
      const detail = lastError instanceof Error ? `: ${lastError.message}` : "";
      throw new Error(`${opts.message ?? "condition not met"} within ${timeoutMs} ms${detail}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
