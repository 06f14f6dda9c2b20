import type { Clock } from '../shared/clock';
import type { KeyOutcome } from './key-activity';
import type { UsageBuffer, UsageRecorder } from './usage-recorder';

export const MINUTE_MS = 60_000;
/** The spans GET /admin/stats/top-keys answers for (CONTRACT §5). */
export const TOP_KEYS_SPANS_MINUTES = [5, 60] as const;
/** How many minutes of buckets are kept: the longest span, and the minute being filled. */
export const TOP_KEYS_KEPT_MINUTES = 61;
/**
 * Keys a minute's bucket keeps, the busiest first: it bounds what a question over an hour reads
 * (60 buckets). A key below this rank in every minute of the span may be missing from the answer;
 * a key in the top 100 of an hour is far above it in the minutes it was busy.
 */
export const MAX_KEYS_PER_MINUTE = 5000;

/** One key's requests within one minute: all that reached the limiter, and those refused with 429. */
export interface MinuteTally {
  requests: number;
  rateLimited: number;
}

export interface BusyKey extends MinuteTally {
  keyId: string;
}

/** Per-minute buckets: Redis for every instance together, or this process's memory. */
export interface TopKeysStore {
  /** Adds a batch of tallies of minute `minute` (minutes since the epoch). */
  add(minute: number, tallies: ReadonlyMap<string, MinuteTally>): Promise<void>;
  /** The `limit` keys with the most requests over minutes `firstMinute`..`lastMinute`, most first. */
  top(firstMinute: number, lastMinute: number, limit: number): Promise<BusyKey[]>;
}

export function minuteOf(epochMs: number): number {
  return Math.floor(epochMs / MINUTE_MS);
}

/** Most requests first; on a tie the key id decides, so every instance answers alike. */
export function busiestFirst(a: BusyKey, b: BusyKey): number {
  return b.requests - a.requests || (a.keyId < b.keyId ? -1 : a.keyId > b.keyId ? 1 : 0);
}

/**
 * Each key's requests per minute, for "the keys with the most traffic now" (GET
 * /admin/stats/top-keys): per minute in its buffer of the one UsageRecorder, written with the
 * others every few seconds, so no request waits on it and no label per key reaches Prometheus. A
 * batch the store refuses is dropped: the ranking is a view of the present, not a ledger.
 */
export class TopKeys {
  /** minute → key id → tally. */
  private readonly buffer: UsageBuffer<number, MinuteTally>;

  constructor(
    private readonly recorder: UsageRecorder,
    private readonly store: TopKeysStore,
    private readonly clock: Clock,
  ) {
    this.buffer = recorder.buffer({
      concern: 'topKeys',
      empty: () => ({ requests: 0, rateLimited: 0 }),
      write: (minute, tallies) => store.add(minute, tallies),
      retriesAreSafe: () => false,
      merge: (pending) => pending,
      weight: (tally) => tally.requests,
    });
  }

  record(keyId: string, outcome: KeyOutcome): void {
    const tally = this.buffer.tally(minuteOf(this.clock.now()), keyId);
    tally.requests += 1;
    if (outcome !== 'admitted') tally.rateLimited += 1;
  }

  /** Writes what has gathered (the recorder's one flush: every concern's buffer). */
  flush(): Promise<void> {
    return this.recorder.flush();
  }

  /** The busiest keys over the last `minutes` minutes (the current one included), across every instance. */
  async top(minutes: number, limit: number): Promise<BusyKey[]> {
    await this.flush();
    const last = minuteOf(this.clock.now());
    return this.store.top(last - minutes + 1, last, limit);
  }
}

/** The in-process store: the last hour's buckets in memory, each cut to its busiest keys once its minute is over. */
export class MemoryTopKeysStore implements TopKeysStore {
  private readonly buckets = new Map<number, Map<string, MinuteTally>>();
  private readonly trimmed = new Set<number>();

  async add(minute: number, tallies: ReadonlyMap<string, MinuteTally>): Promise<void> {
    let bucket = this.buckets.get(minute);
    if (!bucket) this.buckets.set(minute, (bucket = new Map()));
    for (const [keyId, tally] of tallies) {
      const into = bucket.get(keyId) ?? { requests: 0, rateLimited: 0 };
      into.requests += tally.requests;
      into.rateLimited += tally.rateLimited;
      bucket.set(keyId, into);
    }
    this.prune(minute);
  }

  async top(firstMinute: number, lastMinute: number, limit: number): Promise<BusyKey[]> {
    const sums = new Map<string, BusyKey>();
    for (let minute = firstMinute; minute <= lastMinute; minute++) {
      for (const [keyId, tally] of this.buckets.get(minute) ?? []) {
        const sum = sums.get(keyId) ?? { keyId, requests: 0, rateLimited: 0 };
        sum.requests += tally.requests;
        sum.rateLimited += tally.rateLimited;
        sums.set(keyId, sum);
      }
    }
    return [...sums.values()].sort(busiestFirst).slice(0, limit);
  }

  private prune(now: number): void {
    for (const [minute, bucket] of this.buckets) {
      if (minute <= now - TOP_KEYS_KEPT_MINUTES) {
        this.buckets.delete(minute);
        this.trimmed.delete(minute);
      } else if (minute < now && !this.trimmed.has(minute)) {
        this.trimmed.add(minute);
        if (bucket.size > MAX_KEYS_PER_MINUTE) {
          const kept = [...bucket]
            .sort(([a, x], [b, y]) => busiestFirst({ keyId: a, ...x }, { keyId: b, ...y }))
            .slice(0, MAX_KEYS_PER_MINUTE);
          this.buckets.set(minute, new Map(kept));
        }
      }
    }
  }
}
