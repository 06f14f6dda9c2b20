/** How long `eventually` waits, how often it looks, and what it names when it gives up. */
export interface EventuallyOptions {
  /** The deadline: a bound on a hang (or the contract's propagation bound), never a speed test. Default 5000. */
  timeoutMs?: number;
  /** Pause between two checks. Default 20. */
  pollMs?: number;
  /** What is awaited, for the failure message; a function is asked only on failure (e.g. to add a log). */
  what?: string | (() => string);
}

/**
 * The test kit's one wait: checks `check` (sync or async) until it holds, and fails after
 * `timeoutMs` naming `what`. Resolves with the ms it took. A check that throws fails the wait at
 * once (wrap it when a throw means "not yet").
 */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  options: EventuallyOptions = {},
): Promise<number> {
  const { timeoutMs = 5000, pollMs = 20, what = 'condition' } = options;
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > timeoutMs)
      throw new Error(`${typeof what === 'function' ? what() : what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}
