/**
 * Lease releases (maxInFlight) waiting to reach Redis, by the Redis key of the leases' sorted set.
 * A release costs no round trip of its own on the request path: the key's next consume script takes
 * its pending releases along and removes them before it decides (redis-in-flight.ts), so a client at
 * its limit whose next request comes after the last one ended is admitted. What no request takes
 * along goes out off the path in one batch, and at close; a release lost for good (Redis down) is a
 * lease that expires with its ttl.
 *
 * The batch sends only releases that have waited a whole period (between one and two periods, so a
 * release reaches Redis within 2 × `periodMs`): under load the next request takes a release along
 * within a millisecond or two, and a timer that sent everything pending would catch some of those
 * on every tick, a round trip of its own each time.
 */
export class PendingReleases {
  /** Redis key of a key's leases → lease ids released since the last tick, not yet sent. */
  private recent = new Map<string, string[]>();
  /** The same, released before the last tick: the next tick sends them. */
  private waited = new Map<string, string[]>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    /** Sends a batch: every lease id of each Redis key removed from it. Rejections are dropped (the ttl frees them). */
    private readonly send: (batch: Map<string, string[]>) => Promise<void>,
    private readonly periodMs: number,
    /** At most this many releases ride along with one consume (the rest wait for the next, or the batch). */
    private readonly maxCarried: number,
  ) {}

  add(leasesKey: string, leaseId: string): void {
    const held = this.recent.get(leasesKey);
    if (held) held.push(leaseId);
    else this.recent.set(leasesKey, [leaseId]);
    if (this.timer === null) this.schedule();
  }

  /** The releases a consume of this key carries, oldest first (removed from the pending set), or undefined for none. */
  take(leasesKey: string): string[] | undefined {
    const waited = this.waited.get(leasesKey);
    const recent = this.recent.get(leasesKey);
    if (waited === undefined && recent === undefined) return undefined;
    if (waited !== undefined) this.waited.delete(leasesKey);
    if (recent !== undefined) this.recent.delete(leasesKey);
    const carried = waited === undefined ? recent! : recent === undefined ? waited : waited.concat(recent);
    // What one script cannot take waits for the next consume, or the batch.
    if (carried.length > this.maxCarried) this.waited.set(leasesKey, carried.splice(this.maxCarried));
    return carried;
  }

  /** A consume that carried releases failed: whether Redis ran them is unknown, so they go again (ZREM is idempotent). */
  putBack(leasesKey: string, leaseIds: readonly string[]): void {
    for (const id of leaseIds) this.add(leasesKey, id);
  }

  /** Releases not yet sent, all keys (for tests and diagnostics). */
  get size(): number {
    let count = 0;
    for (const generation of [this.waited, this.recent]) for (const held of generation.values()) count += held.length;
    return count;
  }

  /** Sends everything pending now, in one batch (close, tests); resolves when that batch, and any before it, is done. */
  flush(): Promise<void> {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const batch = this.waited;
    for (const [leasesKey, ids] of this.recent) {
      const held = batch.get(leasesKey);
      if (held) held.push(...ids);
      else batch.set(leasesKey, ids);
    }
    this.waited = new Map();
    this.recent = new Map();
    return this.sendBatch(batch);
  }

  private schedule(): void {
    this.timer = setTimeout(() => this.tick(), this.periodMs);
    // A process with nothing else to do does not stay up for its releases; close() sends them.
    this.timer.unref();
  }

  /** Sends what waited a whole period; what came since waits one more, unless a consume takes it. */
  private tick(): void {
    const batch = this.waited;
    this.waited = this.recent;
    this.recent = new Map();
    this.timer = null;
    if (this.waited.size > 0) this.schedule();
    void this.sendBatch(batch);
  }

  private sendBatch(batch: Map<string, string[]>): Promise<void> {
    if (batch.size > 0) {
      const sent = this.send(batch).catch(() => {});
      this.flushing = this.flushing.then(() => sent);
    }
    return this.flushing;
  }
}
