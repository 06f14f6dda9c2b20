import type { Clock } from '../shared/clock';

/** A wrong token is answered no sooner than this: never faster than a right one, and slow to guess with. */
export const FAILED_TOKEN_DELAY_MS = 250;
const WINDOW_MS = 60_000;
/** Addresses remembered at once; a flood of new ones pushes out the oldest. */
const MAX_ADDRESSES = 10_000;

/**
 * Failed admin tokens per client address, in this process: a fixed minute from an address's first
 * failure. Past the limit the address is locked out (even with the right token, so that guessing
 * cannot go on) until its minute ends. Per instance, as the admin listener is loopback by default.
 */
export class FailedTokenLimiter {
  private readonly failures = new Map<string, { count: number; windowEndsAt: number }>();

  constructor(
    /** Config `admin.failedTokensPerMinute`. */
    private readonly perMinute: number,
    private readonly clock: Clock,
  ) {}

  /** Milliseconds until `address` may try again, or 0 if it may now. */
  lockedOutForMs(address: string): number {
    const entry = this.failures.get(address);
    if (!entry) return 0;
    const left = entry.windowEndsAt - this.clock.now();
    if (left <= 0) {
      this.failures.delete(address);
      return 0;
    }
    return entry.count >= this.perMinute ? left : 0;
  }

  recordFailure(address: string): void {
    const now = this.clock.now();
    const entry = this.failures.get(address);
    if (entry && entry.windowEndsAt > now) {
      entry.count++;
      return;
    }
    if (this.failures.size >= MAX_ADDRESSES) this.failures.delete(this.failures.keys().next().value!);
    this.failures.set(address, { count: 1, windowEndsAt: now + WINDOW_MS });
  }
}
