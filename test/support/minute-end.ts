/**
 * Windows run on the real clock (Redis's time with Redis): a case that fills a minute and reads it
 * back must not see a UTC minute turn mid-case, which would empty the window it reads. It starts at
 * least `needMs` before the minute ends, waiting for the next minute when there is less left. The
 * bound is what the case may take on a busy machine (child processes, several round trips), not a
 * speed the test asserts.
 */
export async function awayFromMinuteEnd(needMs: number): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < needMs) await new Promise((resolve) => setTimeout(resolve, left + 250));
}
