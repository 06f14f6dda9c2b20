import type { Clock } from '../shared/clock';
import type { RedisClient } from '../shared/redis';

const DAY_MS = 86_400_000;
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

function byLatest(a: DeprecatedCaller, b: DeprecatedCaller): number {
  return b.lastCallAt - a.lastCallAt || a.keyId.localeCompare(b.keyId);
}

export class MemoryDeprecationUsageStore implements DeprecationUsageStore {
  /** route → day → keyId → count, and route → keyId → last call. */
  private readonly counts = new Map<string, Map<number, Map<string, number>>>();
  private readonly lastCalls = new Map<string, Map<string, number>>();

  async add(route: string, calls: Map<string, { count: number; lastCallAt: number }>, day: number): Promise<void> {
    let days = this.counts.get(route);
    if (!days) this.counts.set(route, (days = new Map()));
    let today = days.get(day);
    if (!today) days.set(day, (today = new Map()));
    let last = this.lastCalls.get(route);
    if (!last) this.lastCalls.set(route, (last = new Map()));
    for (const [keyId, call] of calls) {
      today.set(keyId, (today.get(keyId) ?? 0) + call.count);
      last.set(keyId, Math.max(last.get(keyId) ?? 0, call.lastCallAt));
    }
    for (const old of days.keys()) if (old <= day - LOOKBACK_DAYS) days.delete(old);
    if (last.size > MAX_CALLERS_PER_ROUTE) {
      const oldest = [...last.entries()].sort((a, b) => a[1] - b[1]).slice(0, last.size - MAX_CALLERS_PER_ROUTE);
      for (const [keyId] of oldest) last.delete(keyId);
    }
  }

  async callers(route: string, now: number): Promise<DeprecatedCaller[]> {
    const since = now - LOOKBACK_DAYS * DAY_MS;
    const firstDay = Math.floor(now / DAY_MS) - LOOKBACK_DAYS + 1;
    const days = this.counts.get(route) ?? new Map<number, Map<string, number>>();
    const result: DeprecatedCaller[] = [];
    for (const [keyId, lastCallAt] of this.lastCalls.get(route) ?? []) {
      if (lastCallAt < since) continue;
      let count = 0;
      for (const [day, perKey] of days) if (day >= firstDay) count += perKey.get(keyId) ?? 0;
      result.push({ keyId, count, lastCallAt });
    }
    return result.sort(byLatest);
  }
}

/**
 * Per route: a sorted set of key ids by last call (trimmed to MAX_CALLERS_PER_ROUTE) and one hash
 * of counts per UTC day that expires after the look-back. One hash tag per route keeps a flush on one
 * Cluster slot.
 */
export class RedisDeprecationUsageStore implements DeprecationUsageStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly namespace: string,
  ) {}

  private lastKey(route: string): string {
    return `${this.namespace}:deprecated:{${route}}:last`;
  }
  private dayKey(route: string, day: number): string {
    return `${this.namespace}:deprecated:{${route}}:day:${day}`;
  }

  async add(route: string, calls: Map<string, { count: number; lastCallAt: number }>, day: number): Promise<void> {
    const pipeline = this.redis.multi();
    const dayKey = this.dayKey(route, day);
    for (const [keyId, call] of calls) {
      pipeline.hincrby(dayKey, keyId, call.count);
      pipeline.zadd(this.lastKey(route), 'GT', call.lastCallAt, keyId);
    }
    pipeline.pexpire(dayKey, (LOOKBACK_DAYS + 1) * DAY_MS);
    pipeline.zremrangebyrank(this.lastKey(route), 0, -MAX_CALLERS_PER_ROUTE - 1);
    pipeline.pexpire(this.lastKey(route), (LOOKBACK_DAYS + 1) * DAY_MS);
    await pipeline.exec();
  }

  async callers(route: string, now: number): Promise<DeprecatedCaller[]> {
    const since = now - LOOKBACK_DAYS * DAY_MS;
    const entries = await this.redis.zrangebyscore(this.lastKey(route), since, '+inf', 'WITHSCORES');
    if (entries.length === 0) return [];
    const keyIds: string[] = [];
    const lastCalls: number[] = [];
    for (let i = 0; i < entries.length; i += 2) {
      keyIds.push(entries[i]!);
      lastCalls.push(Number(entries[i + 1]));
    }
    const today = Math.floor(now / DAY_MS);
    const pipeline = this.redis.pipeline();
    for (let day = today - LOOKBACK_DAYS + 1; day <= today; day++) pipeline.hmget(this.dayKey(route, day), ...keyIds);
    const perDay = (await pipeline.exec()) ?? [];
    return keyIds
      .map((keyId, i) => {
        let count = 0;
        for (const [err, values] of perDay) {
          if (err) throw err;
          count += Number((values as Array<string | null>)[i] ?? 0);
        }
        return { keyId, count, lastCallAt: lastCalls[i]! };
      })
      .sort(byLatest);
  }
}
