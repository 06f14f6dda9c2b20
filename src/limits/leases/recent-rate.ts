import type { Clock } from '../../shared/clock';
import { RATE_BUCKETS, RATE_INTERVAL_MS } from './lease-settings';

const BUCKET_MS = RATE_INTERVAL_MS / RATE_BUCKETS;

/**
 * The requests one instance has seen for one key over the last second (RATE_INTERVAL_MS), in
 * RATE_BUCKETS buckets of time: what a lease is sized from. Counts requests, not units: a lease
 * is sized in units by the caller (requests × cost).
 */
export class RecentRate {
  private readonly counts = new Array<number>(RATE_BUCKETS).fill(0);
  /** The bucket number (epoch ms ÷ BUCKET_MS) the newest count went into. */
  private newestBucket = -Infinity;

  constructor(private readonly clock: Clock) {}

  /** One request of the key seen now. */
  record(requests = 1): void {
    const bucket = this.advance();
    this.counts[bucket % RATE_BUCKETS]! += requests;
  }

  /** Requests per second over the last RATE_INTERVAL_MS (the bucket under way counts whole). */
  perSecond(): number {
    this.advance();
    let sum = 0;
    for (const count of this.counts) sum += count;
    return (sum * 1_000) / RATE_INTERVAL_MS;
  }

  /** True when nothing was seen over the whole interval: the caller may forget this key. */
  idle(): boolean {
    return this.perSecond() === 0;
  }

  /** Empties the buckets time has left behind; returns the current bucket number. */
  private advance(): number {
    const bucket = Math.floor(this.clock.now() / BUCKET_MS);
    if (bucket - this.newestBucket >= RATE_BUCKETS) this.counts.fill(0);
    else for (let b = this.newestBucket + 1; b <= bucket; b++) this.counts[b % RATE_BUCKETS] = 0;
    if (bucket > this.newestBucket) this.newestBucket = bucket;
    return this.newestBucket;
  }
}
