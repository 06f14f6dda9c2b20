/**
 * Lease releases (maxInFlight) waiting to reach Redis, by the Redis key of the leases' sorted set.
 * A release costs no round trip of its own on the request path: the key's next consume script takes
 * its pending releases along and removes them before it decides (redis-in-flight.ts), so a client at
 * its limit whose next request comes after the last one ended is admitted. What no request takes
 * along goes out off the path in one batch after `flushAfterMs`, and at close; a release lost for
 * good (Redis down) is a lease that expires with its ttl.
 */
export class PendingReleases {
  /** Redis key of a key's leases → lease ids released in this process and not yet sent. */
  private readonly byKey = new Map<string, string[]>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    /** Sends a batch: every lease id of each Redis key removed from it. Rejections are dropped (the ttl frees them). */
    private readonly send: (batch: Map<string, string[]>) => Promise<void>,
    private readonly flushAfterMs: number,
    /** At most this many releases ride along with one consume (the rest wait for the next, or the flush). */
    private readonly maxCarried: number,
  ) {}

  add(leasesKey: string, leaseId: string): void {
    const held = this.byKey.get(leasesKey);
    if (held) held.push(leaseId);
    else this.byKey.set(leasesKey, [leaseId]);
    if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), this.flushAfterMs);
      // A process with nothing else to do does not stay up for its releases; close() sends them.
      this.timer.unref();
    }
  }

  /** The releases a consume of this key carries (removed from the pending set), or undefined for none. */
  take(leasesKey: string): string[] | undefined {
    const held = this.byKey.get(leasesKey);
    if (held === undefined) return undefined;
    if (held.length <= this.maxCarried) {
      this.byKey.delete(leasesKey);
      return held;
    }
    return held.splice(0, this.maxCarried);
  }

  /** A consume that carried releases failed: whether Redis ran them is unknown, so they go again (ZREM is idempotent). */
  putBack(leasesKey: string, leaseIds: readonly string[]): void {
    for (const id of leaseIds) this.add(leasesKey, id);
  }

  /** Releases not yet sent, all keys (for tests and diagnostics). */
  get size(): number {
    let count = 0;
    for (const held of this.byKey.values()) count += held.length;
    return count;
  }

  /** Sends everything pending now, in one batch; resolves when that batch (and any before it) is done. */
  flush(): Promise<void> {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.byKey.size > 0) {
      const batch = new Map(this.byKey);
      this.byKey.clear();
      const sent = this.send(batch).catch(() => {});
      this.flushing = this.flushing.then(() => sent);
    }
    return this.flushing;
  }
}
