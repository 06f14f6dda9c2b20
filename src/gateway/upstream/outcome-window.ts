/** Buckets a window is kept in: it slides a tenth of its length at a time. */
const BUCKETS = 10;

/** What a window holds: requests settled as a success or a failure (those that count for nothing are not in it). */
export interface WindowTotals {
  successes: number;
  failures: number;
}

/**
 * Successes and failures over the last `windowMs`, in ten buckets (resilience4j's time-based
 * sliding window): a constant cost per request however many thousands come in a second, and
 * outcomes older than the window drop out a bucket at a time. Pure over the times it is given.
 */
export class OutcomeWindow {
  private readonly bucketMs: number;
  private readonly successes = new Array<number>(BUCKETS).fill(0);
  private readonly failures = new Array<number>(BUCKETS).fill(0);
  /** The bucket number (time / bucketMs) of the newest bucket. */
  private newest = 0;

  constructor(windowMs: number) {
    this.bucketMs = windowMs / BUCKETS;
  }

  record(outcome: 'success' | 'failure', now: number): void {
    this.slideTo(now);
    const counts = outcome === 'success' ? this.successes : this.failures;
    counts[this.newest % BUCKETS]!++;
  }

  totals(now: number): WindowTotals {
    this.slideTo(now);
    let successes = 0;
    let failures = 0;
    for (let i = 0; i < BUCKETS; i++) {
      successes += this.successes[i]!;
      failures += this.failures[i]!;
    }
    return { successes, failures };
  }

  clear(): void {
    this.successes.fill(0);
    this.failures.fill(0);
  }

  /** Empties the buckets that fell out of the window since the newest one. */
  private slideTo(now: number): void {
    const bucket = Math.floor(now / this.bucketMs);
    if (bucket <= this.newest) return;
    if (bucket - this.newest >= BUCKETS) {
      this.clear();
    } else {
      for (let b = this.newest + 1; b <= bucket; b++) {
        this.successes[b % BUCKETS] = 0;
        this.failures[b % BUCKETS] = 0;
      }
    }
    this.newest = bucket;
  }
}
