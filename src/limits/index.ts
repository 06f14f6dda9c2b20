import { systemClock, type Clock } from '../shared/clock';
import type { RedisClient } from '../shared/redis';
import { createMemoryAddressLimiter, createRedisAddressLimiter } from './address-limiter';
import { MemoryKeyLimiter } from './memory-key-limiter';
import { RedisKeyLimiter } from './redis-key-limiter';
import type { AddressLimiter, BanSettings, KeyLimiter } from './types';

export type * from './types';
export { FlexibleAddressLimiter, createMemoryAddressLimiter, createRedisAddressLimiter } from './address-limiter';
export { MemoryKeyLimiter, type MemoryKeyLimiterOptions } from './memory-key-limiter';
export { RedisKeyLimiter, keyLimiterRedisKey, type RedisKeyLimiterOptions } from './redis-key-limiter';

export interface LimitersOptions {
  /** Shared Redis (counts global across instances), or null for the in-process store. */
  redis: RedisClient | null;
  /** Key prefix in Redis (config `redis.namespace`). */
  namespace: string;
  ban: BanSettings;
  /** Config `anonymous.perMinute`. */
  anonymousPerMinute: number;
  /**
   * Time for the in-process store and for address reset instants. With Redis, key windows and bans
   * follow Redis TIME unless a clock other than `systemClock` is given (tests), so that every
   * instance decides on the same clock.
   */
  clock?: Clock;
}

export interface Limiters {
  keys: KeyLimiter;
  addresses: AddressLimiter;
}

export function createLimiters(options: LimitersOptions): Limiters {
  const clock = options.clock ?? systemClock;
  if (options.redis === null) {
    return {
      keys: new MemoryKeyLimiter({ ban: options.ban, clock }),
      addresses: createMemoryAddressLimiter({ perMinute: options.anonymousPerMinute, clock }),
    };
  }
  return {
    keys: new RedisKeyLimiter(options.redis, {
      namespace: options.namespace,
      ban: options.ban,
      clock: clock === systemClock ? undefined : clock,
    }),
    addresses: createRedisAddressLimiter(options.redis, {
      namespace: options.namespace,
      perMinute: options.anonymousPerMinute,
      clock,
    }),
  };
}
