import type { Clock } from '../shared/clock';
import { DAY_MS } from './key-activity';

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

/** Where calls are kept: Redis for every instance together, or this process alone. */
export interface DeprecationUsageStore {
  add(route: string, calls: Map<string, { count: number; lastCallAt: number }>, day: number): Promise<void>;
  callers(route: string, now: number): Promise<DeprecatedCaller[]>;
}

/**
 * Counts calls of deprecated operations per key without touching the store on the request path:
 * calls gather in memory and are flushed every few seconds in one pipelined write.
 */
export class DeprecationUsageRecorder {
  private pending = new Map<string, Map<string, { count: number; lastCallAt: number }>>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly store: DeprecationUsageStore,
    private readonly clock: Clock,
    flushIntervalMs = 5000,
    private readonly onFlushError: (err: unknown) => void = () => {},
  ) {
    this.timer = setInterval(() => void this.flush(), flushIntervalMs);
    this.timer.unref();
  }

  record(route: string, keyId: string): void {
    let calls = this.pending.get(route);
    if (!calls) this.pending.set(route, (calls = new Map()));
    const entry = calls.get(keyId);
    const now = this.clock.now();
    if (entry) {
      entry.count += 1;
      entry.lastCallAt = now;
    } else {
      calls.set(keyId, { count: 1, lastCallAt: now });
    }
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    const day = Math.floor(this.clock.now() / DAY_MS);
    try {
      for (const [route, calls] of batch) await this.store.add(route, calls, day);
    } catch (err) {
      this.onFlushError(err);
    }
  }

  async callers(route: string): Promise<DeprecatedCaller[]> {
    await this.flush();
    return this.store.callers(route, this.clock.now());
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}

/** Latest call first; ties by key id, so a list reads the same on every store. */
export function byLatest(a: DeprecatedCaller, b: DeprecatedCaller): number {
  return b.lastCallAt - a.lastCallAt || a.keyId.localeCompare(b.keyId);
}
