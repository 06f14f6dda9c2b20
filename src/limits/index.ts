import { systemClock, type Clock } from '../shared/clock';
import type { RedisClient } from '../shared/redis/redis';
import { createMemoryAddressLimiter, createRedisAddressLimiter } from './address/address-limiter';
import { MemoryKeyLimiter } from './memory-key-limiter';
import { RedisKeyLimiter } from './redis/redis-key-limiter';
import { LeasingKeyLimiter } from './leases/leasing-key-limiter';
import { redisBanNotices } from './leases/ban-notices';
import { FallbackAddressLimiter, FallbackKeyLimiter, StoreHealth, type FailMode } from './store-fallback';
import type { AddressLimiter, BanSettings, KeyLimiter, MinuteWindowShape } from './types';
import type { MonthLedger } from './windows/month-ledger';

export type * from './types';
export {
  FlexibleAddressLimiter,
  createMemoryAddressLimiter,
  createRedisAddressLimiter,
} from './address/address-limiter';
export { MemoryKeyLimiter, type MemoryKeyLimiterOptions } from './memory-key-limiter';
export { SqliteMonthLedger, MONTHS_DATABASE_FILE } from './windows/sqlite-month-ledger';
export type { MonthEntry, MonthLedger } from './windows/month-ledger';
export { RedisKeyLimiter, type RedisKeyLimiterOptions } from './redis/redis-key-limiter';
export {
  activeBansRedisKey,
  keyLimiterRedisKey,
  leasesRedisKey,
  monthRedisKey,
  slidingLogRedisKey,
} from './redis/redis-names';
export { keyRefOf } from './key-ref';
export { shiftedRemaining } from './windows/shifted-remaining';
export { FallbackAddressLimiter, FallbackKeyLimiter, StoreHealth, type FailMode } from './store-fallback';

export interface LimitersOptions {
  /** Shared Redis (counts global across instances), or null for the in-process store. */
  redis: RedisClient | null;
  /** Key prefix in Redis (config `redis.namespace`). */
  namespace: string;
  ban: BanSettings;
  /** Config `rateLimit.minuteWindow`; default `fixed`. */
  minuteWindow?: MinuteWindowShape;
  /** Config `anonymous.perMinute`. */
  anonymousPerMinute: number;
  /**
   * Time for the in-process store and for address reset instants. With Redis, key windows and bans
   * follow Redis TIME unless a clock other than `systemClock` is given (tests), so that every
   * instance decides on the same clock.
   */
  clock?: Clock;
  /** Config `store.failMode`: what decides while Redis does not answer. Default `local`. */
  failMode?: FailMode;
  /** How often a degraded limiter asks Redis whether it is back. Default 250 ms. */
  probeIntervalMs?: number;
  events?: Partial<LimiterEvents>;
  /** In process only: where month windows and credits outlive a restart (CONTRACT §4). */
  monthLedger?: MonthLedger;
  /** A batched write of month windows to the ledger failed (it is tried again with the next). */
  onMonthLedgerError?(err: unknown): void;
  /**
   * Leases of units (docs/scaling.md "Leases"; Redis with a fixed minute only): config
   * `rateLimit.leases.enabled` as in force now. Absent: no leases.
   */
  leasesEnabled?(): boolean;
  /** Config `rateLimit.leases.busyRequestsPerSecond` as in force now. */
  leasesBusyRequestsPerSecond?(): number;
  /** Config `redis.commandTimeoutMs`: a decision Redis runs after the client gave up counts nothing. */
  commandTimeoutMs?: number;
}

export interface LimiterEvents {
  /** A limiter call to Redis failed and was answered by the fallback (`local`, `open`). */
  storeError(err: unknown): void;
  /** Redis stopped answering; decisions come from the fallback until it is back. */
  degraded(err: unknown): void;
  recovered(): void;
}

export interface Limiters {
  keyLimiter: KeyLimiter;
  addressLimiter: AddressLimiter;
  /** Whether the limiters decide on their fallback now; null when there is no fallback (no Redis, or `closed`). */
  health: StoreHealth | null;
  /** The leasing limiter in front of Redis (its counts are metrics); null without leases. */
  leases: LeasingKeyLimiter | null;
  close(): Promise<void>;
}

export const DEFAULT_PROBE_INTERVAL_MS = 250;

/** The leasing limiter in front of the Redis store, or null when leases are not configured. */
function leasingLimiter(
  store: RedisKeyLimiter,
  redis: RedisClient,
  options: LimitersOptions,
  clock: Clock,
): LeasingKeyLimiter | null {
  const enabled = options.leasesEnabled;
  // A sliding minute's units are entries of its log: a lease's could not go back, so it has none.
  if (!enabled || options.minuteWindow === 'sliding') return null;
  return new LeasingKeyLimiter(store, {
    clock,
    enabled,
    busyRequestsPerSecond: options.leasesBusyRequestsPerSecond,
    bans: redisBanNotices(redis, options.namespace),
  });
}

export function createLimiters(options: LimitersOptions): Limiters {
  const clock = options.clock ?? systemClock;
  const createMemoryKeyLimiter = (ban: BanSettings) =>
    new MemoryKeyLimiter({ ban, clock, minuteWindow: options.minuteWindow });
  const createAddressFallback = () => createMemoryAddressLimiter({ perMinute: options.anonymousPerMinute, clock });
  if (options.redis === null) {
    const keyLimiter = new MemoryKeyLimiter({
      ban: options.ban,
      clock,
      minuteWindow: options.minuteWindow,
      monthLedger: options.monthLedger,
      onMonthLedgerError: options.onMonthLedgerError,
    });
    return {
      keyLimiter,
      addressLimiter: createAddressFallback(),
      health: null,
      leases: null,
      close: () => keyLimiter.close(),
    };
  }
  const redis = options.redis;
  const store = new RedisKeyLimiter(redis, {
    namespace: options.namespace,
    ban: options.ban,
    minuteWindow: options.minuteWindow,
    clock: clock === systemClock ? undefined : clock,
    commandTimeoutMs: options.commandTimeoutMs,
  });
  const leases = leasingLimiter(store, redis, options, clock);
  const keys: KeyLimiter = leases ?? store;
  const addresses = createRedisAddressLimiter(redis, {
    namespace: options.namespace,
    perMinute: options.anonymousPerMinute,
    clock,
  });
  const mode = options.failMode ?? 'local';
  if (mode === 'closed')
    return { keyLimiter: keys, addressLimiter: addresses, health: null, leases, close: () => keys.close() };

  const events = options.events ?? {};
  const health = new StoreHealth(() => redis.ping(), options.probeIntervalMs ?? DEFAULT_PROBE_INTERVAL_MS, {
    degraded: (err) => events.degraded?.(err),
    recovered: () => {
      void fallbackKeys.reset();
      fallbackAddresses.reset();
      events.recovered?.();
    },
  });
  const onStoreError = (err: unknown) => events.storeError?.(err);
  // Open mode serves every request, so its fallback only counts: it must never ban.
  const fallbackBan: BanSettings =
    mode === 'open' ? { ...options.ban, threshold: Number.MAX_SAFE_INTEGER } : options.ban;
  const fallbackKeys = new FallbackKeyLimiter(keys, {
    mode,
    health,
    onStoreError,
    createFallback: () => createMemoryKeyLimiter(fallbackBan),
  });
  const fallbackAddresses = new FallbackAddressLimiter(addresses, {
    mode,
    health,
    onStoreError,
    createFallback: createAddressFallback,
  });
  return {
    keyLimiter: fallbackKeys,
    addressLimiter: fallbackAddresses,
    health,
    leases,
    close: async () => {
      health.close();
      await fallbackKeys.close();
    },
  };
}
