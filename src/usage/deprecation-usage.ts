import type { Clock } from '../shared/clock';
import { DAY_MS } from './key-activity';
import type { UsageBuffer, UsageRecorder } from './usage-recorder';

/** How far back operators look for callers of a deprecated operation. */
export const LOOKBACK_DAYS = 30;
/** Callers remembered per route; the least recent go first beyond this. */
export const MAX_CALLERS_PER_ROUTE = 10_000;

export interface DeprecatedCaller {
  keyId: string;
  /** Calls within the last 30 days. */
  count: number;
  /** Epoch ms of the latest call. */
  lastCallAt: number;
}

/** One key's calls of one deprecated operation since the last flush. */
export interface CallTally {
  count: number;
  /** Epoch ms of the latest call. */
  lastCallAt: number;
}

/** Where calls are kept: Redis for every instance together, or this process alone. */
export interface DeprecationUsageStore {
  add(route: string, calls: ReadonlyMap<string, CallTally>, day: number): Promise<void>;
  callers(route: string, now: number): Promise<DeprecatedCaller[]>;
}

/**
 * Calls of deprecated operations per key (GET /admin/deprecations): per operation in its buffer of
 * the one UsageRecorder, written with the others every few seconds (one pipelined write per
 * operation, counted on the UTC day of the flush). A batch the store refuses is dropped.
 */
export class DeprecationUsage {
  /** operation id → key id → calls. */
  private readonly buffer: UsageBuffer<string, CallTally>;

  constructor(
    private readonly recorder: UsageRecorder,
    private readonly store: DeprecationUsageStore,
    private readonly clock: Clock,
  ) {
    this.buffer = recorder.buffer({
      concern: 'deprecationUsage',
      empty: () => ({ count: 0, lastCallAt: 0 }),
      write: (route, calls) => store.add(route, calls, Math.floor(clock.now() / DAY_MS)),
      retriesAreSafe: () => false,
      merge: (pending) => pending,
      weight: (tally) => tally.count,
    });
  }

  record(route: string, keyId: string): void {
    const tally = this.buffer.tally(route, keyId);
    tally.count += 1;
    tally.lastCallAt = this.clock.now();
  }

  /** Writes what has gathered (the recorder's one flush: every concern's buffer). */
  flush(): Promise<void> {
    return this.recorder.flush();
  }

  async callers(route: string): Promise<DeprecatedCaller[]> {
    await this.flush();
    return this.store.callers(route, this.clock.now());
  }
}

/** Latest call first; ties by key id, so a list reads the same on every store. */
export function byLatest(a: DeprecatedCaller, b: DeprecatedCaller): number {
  return b.lastCallAt - a.lastCallAt || a.keyId.localeCompare(b.keyId);
}
