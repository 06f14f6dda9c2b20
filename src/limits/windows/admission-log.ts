import { MINUTE_MS } from './windows';

/** Dropped entries are only compacted away once this many have piled up (and at least half the array). */
const COMPACT_AFTER = 1024;

/**
 * The admission times of a sliding minute, oldest first: a queue on an array with a moving start,
 * so that dropping the oldest is O(1) (Array#shift and #splice move every element once the array is
 * large, which would make a key with a large limit cost O(limit) per request).
 */
export class AdmissionLog {
  private times: number[] = [];
  private start = 0;

  /** Admissions in the interval (now - 60 s, now], without changing the log. */
  countAt(now: number): number {
    return this.times.length - this.firstInInterval(now);
  }

  /** The oldest admission in (now - 60 s, now], or 0 for none; changes nothing. */
  oldestAt(now: number): number {
    const first = this.firstInInterval(now);
    return first < this.times.length ? this.times[first]! : 0;
  }

  /** The n-th oldest admission (1-based) in (now - 60 s, now], or 0 when there are fewer; changes nothing. */
  nthOldestAt(now: number, n: number): number {
    const at = this.firstInInterval(now) + n - 1;
    return at < this.times.length ? this.times[at]! : 0;
  }

  /** Drops the admissions that have left the interval (now - 60 s, now]; returns how many are left. */
  prune(now: number): number {
    this.start = this.firstInInterval(now);
    if (this.start >= COMPACT_AFTER && this.start * 2 >= this.times.length) {
      this.times = this.times.slice(this.start);
      this.start = 0;
    }
    return this.times.length - this.start;
  }

  push(at: number): void {
    this.times.push(at);
  }

  /** Starts the log afresh with `count` admissions at `at` (a snapshot of another store). */
  fill(count: number, at: number): void {
    this.times = Array<number>(count).fill(at);
    this.start = 0;
  }

  private firstInInterval(now: number): number {
    const times = this.times;
    let first = this.start;
    while (first < times.length && times[first]! <= now - MINUTE_MS) first++;
    return first;
  }
}
