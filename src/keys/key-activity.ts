import type { Clock } from '../shared/clock';
import type { RedisClient } from '../shared/redis';

const DAY_MS = 86_400_000;
/** How many UTC days of usage history are kept per key (CONTRACT §5). */
export const USAGE_HISTORY_DAYS = 90;

/** What the limiter decided for one request of a key, as the usage history counts it. */
export type KeyOutcome = 'admitted' | 'rateLimited' | 'banned';

export interface KeyTally {
  admitted: number;
  rateLimited: number;
  banned: number;
  /** Epoch ms of the latest admitted request in the batch; 0 when none was admitted. */
  lastUsedAt: number;
}

export interface DayUsage {
  /** UTC day, `YYYY-MM-DD`. */
  date: string;
  admitted: number;
  rateLimited: number;
  banned: number;
}

/** Where usage is kept: Redis for every instance together, or this process alone. */
export interface KeyActivityStore {
  /** Adds a batch of tallies of UTC day `day` (days since the epoch). Counts add up; never set. */
  add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void>;
  /** Counts of days `firstDay`..`lastDay`, oldest first, zero-filled. */
  days(keyId: string, firstDay: number, lastDay: number): Promise<Array<Omit<DayUsage, 'date'>>>;
  /** Epoch ms of each key's latest admitted request; keys never used are absent. */
  lastUsed(keyIds: readonly string[]): Promise<Map<string, number>>;
}

function emptyTally(): KeyTally {
  return { admitted: 0, rateLimited: 0, banned: 0, lastUsedAt: 0 };
}

export function dayOf(epochMs: number): number {
  return Math.floor(epochMs / DAY_MS);
}

function dateOf(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

/**
 * Counts each key's requests (admitted, rate-limited, banned) and its last use without touching the
 * store on the request path: tallies gather in memory per UTC day and go to the store in one batch
 * every few seconds and at shutdown, as the deprecated-callers report does.
 */
export class KeyActivityRecorder {
  /** day → key id → tally. */
  private pending = new Map<number, Map<string, KeyTally>>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: KeyActivityStore,
    private readonly clock: Clock,
    flushIntervalMs = 5000,
    private readonly onFlushError: (err: unknown) => void = () => {},
  ) {
    this.timer = setInterval(() => void this.flush(), flushIntervalMs);
    this.timer.unref();
  }

  record(keyId: string, outcome: KeyOutcome): void {
    const now = this.clock.now();
    const day = dayOf(now);
    let tallies = this.pending.get(day);
    if (!tallies) this.pending.set(day, (tallies = new Map()));
    let tally = tallies.get(keyId);
    if (!tally) tallies.set(keyId, (tally = emptyTally()));
    tally[outcome] += 1;
    if (outcome === 'admitted') tally.lastUsedAt = now;
  }

  /**
   * Sends what has gathered. Flushes run one after another, so a batch is never written twice; a batch
   * the store refused is reported and dropped (a count may be lost in an outage, never doubled).
   */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.flushOnce());
    return this.flushing;
  }

  async usage(keyId: string, days: number): Promise<{ keyId: string; days: DayUsage[] }> {
    await this.flush();
    const lastDay = dayOf(this.clock.now());
    const firstDay = lastDay - days + 1;
    const counts = await this.store.days(keyId, firstDay, lastDay);
    return { keyId, days: counts.map((c, i) => ({ date: dateOf(firstDay + i), ...c })) };
  }

  async lastUsed(keyIds: readonly string[]): Promise<Map<string, number>> {
    await this.flush();
    return this.store.lastUsed(keyIds);
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private async flushOnce(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    for (const [day, tallies] of batch) {
      try {
        await this.store.add(day, tallies);
      } catch (err) {
        this.onFlushError(err);
      }
    }
  }
}

export class MemoryKeyActivityStore implements KeyActivityStore {
  /** key id → day → counts. */
  private readonly counts = new Map<string, Map<number, Omit<KeyTally, 'lastUsedAt'>>>();
  private readonly lastUses = new Map<string, number>();

  async add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void> {
    for (const [keyId, tally] of tallies) {
      let days = this.counts.get(keyId);
      if (!days) this.counts.set(keyId, (days = new Map()));
      const counts = days.get(day) ?? { admitted: 0, rateLimited: 0, banned: 0 };
      counts.admitted += tally.admitted;
      counts.rateLimited += tally.rateLimited;
      counts.banned += tally.banned;
      days.set(day, counts);
      for (const old of days.keys()) if (old <= day - USAGE_HISTORY_DAYS) days.delete(old);
      if (tally.lastUsedAt > (this.lastUses.get(keyId) ?? 0)) this.lastUses.set(keyId, tally.lastUsedAt);
    }
  }

  async days(keyId: string, firstDay: number, lastDay: number): Promise<Array<Omit<DayUsage, 'date'>>> {
    const days = this.counts.get(keyId);
    const result: Array<Omit<DayUsage, 'date'>> = [];
    for (let day = firstDay; day <= lastDay; day++) {
      const c = days?.get(day);
      result.push({ admitted: c?.admitted ?? 0, rateLimited: c?.rateLimited ?? 0, banned: c?.banned ?? 0 });
    }
    return result;
  }

  async lastUsed(keyIds: readonly string[]): Promise<Map<string, number>> {
    const result = new Map<string, number>();
    for (const id of keyIds) {
      const at = this.lastUses.get(id);
      if (at !== undefined) result.set(id, at);
    }
    return result;
  }
}

/**
 * Redis layout:
 *   <ns>:key-usage:{<key id>}   HASH  `<day>:a|r|b` → count (HINCRBY, so instances add up exactly);
 *                                     one hash tag per key keeps a key's flush on one Cluster slot
 *   <ns>:keys:{k}:last-used     ZSET  key id → epoch ms of the latest admitted request (ZADD GT)
 */
export class RedisKeyActivityStore implements KeyActivityStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly namespace: string,
  ) {}

  private usageKey(keyId: string): string {
    return `${this.namespace}:key-usage:{${keyId}}`;
  }

  private get lastUsedKey(): string {
    return `${this.namespace}:keys:{k}:last-used`;
  }

  async add(day: number, tallies: ReadonlyMap<string, KeyTally>): Promise<void> {
    const writes: Array<Promise<unknown>> = [];
    const lastUses: Array<string | number> = [];
    for (const [keyId, tally] of tallies) {
      const key = this.usageKey(keyId);
      const tx = this.redis.multi();
      if (tally.admitted > 0) tx.hincrby(key, `${day}:a`, tally.admitted);
      if (tally.rateLimited > 0) tx.hincrby(key, `${day}:r`, tally.rateLimited);
      if (tally.banned > 0) tx.hincrby(key, `${day}:b`, tally.banned);
      // The week of days just past the history: older ones were dropped by earlier flushes.
      const stale: string[] = [];
      for (let old = day - USAGE_HISTORY_DAYS - 7; old <= day - USAGE_HISTORY_DAYS; old++) stale.push(`${old}:a`, `${old}:r`, `${old}:b`);
      tx.hdel(key, ...stale);
      tx.pexpire(key, (USAGE_HISTORY_DAYS + 1) * DAY_MS);
      writes.push(tx.exec().then(throwFirstError));
      if (tally.lastUsedAt > 0) lastUses.push(tally.lastUsedAt, keyId);
    }
    if (lastUses.length > 0) writes.push(this.redis.zadd(this.lastUsedKey, 'GT', ...lastUses));
    const results = await Promise.allSettled(writes);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  async days(keyId: string, firstDay: number, lastDay: number): Promise<Array<Omit<DayUsage, 'date'>>> {
    const fields: string[] = [];
    for (let day = firstDay; day <= lastDay; day++) fields.push(`${day}:a`, `${day}:r`, `${day}:b`);
    const values = await this.redis.hmget(this.usageKey(keyId), ...fields);
    const result: Array<Omit<DayUsage, 'date'>> = [];
    for (let i = 0; i < values.length; i += 3) {
      result.push({ admitted: Number(values[i] ?? 0), rateLimited: Number(values[i + 1] ?? 0), banned: Number(values[i + 2] ?? 0) });
    }
    return result;
  }

  async lastUsed(keyIds: readonly string[]): Promise<Map<string, number>> {
    const result = new Map<string, number>();
    if (keyIds.length === 0) return result;
    const scores = await this.redis.zmscore(this.lastUsedKey, ...keyIds);
    keyIds.forEach((id, i) => {
      const score = scores[i];
      if (score !== null && score !== undefined) result.set(id, Number(score));
    });
    return result;
  }
}

function throwFirstError(results: Array<[Error | null, unknown]> | null): void {
  if (results === null) throw new Error('transaction aborted');
  for (const [err] of results) if (err) throw err;
}
