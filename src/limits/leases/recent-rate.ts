import type { Clock } from '../../shared/clock';
import { RATE_BUCKET_MS, RATE_INTERVAL_MS } from './lease-settings';

const BUCKETS = RATE_INTERVAL_MS / RATE_BUCKET_MS;
const SECOND_BUCKETS = 1_000 / RATE_BUCKET_MS;

/**
 * The requests one instance has seen for one key over the last RATE_INTERVAL_MS, in buckets of
 * RATE_BUCKET_MS: their rate (is the key busy here?) and the busiest bucket's rate (what a
 * lease is sized from: a key that comes in bursts keeps leases of a burst's size at the next burst
 * instead of starting again from the quiet gap's rate). Counts requests, not units: a lease is sized
 * in units by the caller (requests × cost).
 */
export class RecentRate {
  private readonly counts = new Array<number>(BUCKETS).fill(0);
  /** The bucket number (epoch ms ÷ RATE_BUCKET_MS) the newest count went into. */
  private newestBucket = -Infinity;

  constructor(private readonly clock: Clock) {}

  /** One request of the key seen now. */
  record(requests = 1): void {
    const bucket = this.advance();
    this.counts[bucket % BUCKETS]! += requests;
  }

  /**
   * Requests per second: the higher of the last second's average (a key turning busy is seen as soon
   * as before) and the whole interval's (a key in bursts once a second stays busy across the gaps).
   * The bucket under way counts whole.
   */
  perSecond(): number {
    const newest = this.advance();
    let lastSecond = 0;
    for (let b = newest - SECOND_BUCKETS + 1; b <= newest; b++) lastSecond += this.counts[b % BUCKETS]!;
    let all = 0;
    for (const count of this.counts) all += count;
    return Math.max(lastSecond, (all * 1_000) / RATE_INTERVAL_MS);
  }

  /** Requests per second of the busiest bucket of the last RATE_INTERVAL_MS (the one under way included). */
  peakPerSecond(): number {
    this.advance();
    let peak = 0;
    for (const count of this.counts) if (count > peak) peak = count;
    return (peak * 1_000) / RATE_BUCKET_MS;
  }

  /** True when nothing was seen over the whole interval: the caller may forget this key. */
  idle(): boolean {
    return this.perSecond() === 0;
  }

  /** Empties the buckets time has left behind; returns the current bucket number. */
  private advance(): number {
    const bucket = Math.floor(this.clock.now() / RATE_BUCKET_MS);
    if (bucket - this.newestBucket >= BUCKETS) this.counts.fill(0);
    else for (let b = this.newestBucket + 1; b <= bucket; b++) this.counts[b % BUCKETS] = 0;
    if (bucket > this.newestBucket) this.newestBucket = bucket;
    return this.newestBucket;
  }
}
