/**
 * Retry-After is whole seconds and at least 1 (CONTRACT §4): a wait of 0 or less, or a fraction of
 * a second, still tells the client to come back no sooner than the next second. Every Retry-After
 * the gateway computes from a wait in ms (429s, bans, an open circuit) goes through here.
 */
export function retryAfterSeconds(waitMs: number): string {
  return String(Math.max(1, Math.ceil(waitMs / 1000)));
}
