/** The map is swept for expired entries once it holds this many, then whenever it has doubled since. */
const FIRST_SWEEP_AT = 1024;

/**
 * The leases this instance took near their key's maxInFlight (redis-in-flight.ts, isNearLimit):
 * their release goes to Redis at once instead of riding along with the key's next consume or the
 * batch. A lease whose release never comes (its response closed before the decision) would stay
 * here for good; it is dropped once it has expired in Redis as well, by a sweep whenever the map
 * has doubled, so the sweeps cost O(1) per lease.
 */
export class LeasesNearLimit {
  /** Lease id → when it expires in Redis (epoch ms). */
  private readonly expiresAt = new Map<string, number>();
  private sweepAt = FIRST_SWEEP_AT;

  add(leaseId: string, ttlMs: number, now = Date.now()): void {
    this.expiresAt.set(leaseId, now + ttlMs);
    if (this.expiresAt.size >= this.sweepAt) this.sweep(now);
  }

  /** Whether the lease was taken near its limit (forgotten here either way). */
  take(leaseId: string): boolean {
    return this.expiresAt.delete(leaseId);
  }

  /** Leases remembered (tests and diagnostics). */
  get size(): number {
    return this.expiresAt.size;
  }

  private sweep(now: number): void {
    for (const [leaseId, expiresAt] of this.expiresAt) if (expiresAt <= now) this.expiresAt.delete(leaseId);
    this.sweepAt = Math.max(FIRST_SWEEP_AT, this.expiresAt.size * 2);
  }
}
