import type { RedisClient } from '../shared/redis/redis';
import { DAY_MS } from './key-activity';
import {
  byLatest,
  LOOKBACK_DAYS,
  MAX_CALLERS_PER_ROUTE,
  type CallTally,
  type DeprecatedCaller,
  type DeprecationUsageStore,
} from './deprecation-usage';

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

  async add(route: string, calls: ReadonlyMap<string, CallTally>, day: number): Promise<void> {
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
