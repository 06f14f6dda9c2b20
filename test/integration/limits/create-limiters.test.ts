import type Redis from 'ioredis';
import { ManualClock, systemClock } from '../../../src/shared/clock';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import {
  FallbackKeyLimiter,
  MemoryKeyLimiter,
  RedisKeyLimiter,
  createLimiters,
  keyLimiterRedisKey,
} from '../../../src/limits';
import { uniqueNamespace } from '../../support/test-redis';
import { useRedisPerFile } from '../../support/redis-per-file';

const ban = { threshold: 10, windowSeconds: 60, durationSeconds: 900 };
const limits = { perMinute: 60, perDay: 1000 };

let client: RedisClient;
// A Redis of this file's own: MONITOR on the shared test Redis, busy with the other suites, trips
// ioredis's reply bookkeeping ("Command queue state error", redis/ioredis#1981).
const redis = useRedisPerFile();

beforeAll(async () => {
  client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 });
});

afterAll(async () => {
  await client.quit();
});

describe('createLimiters', () => {
  it('builds in-process limiters without Redis, on the given clock', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 12));
    const { keyLimiter: keys, addressLimiter: addresses } = createLimiters({
      redis: null,
      namespace: 'unused',
      ban,
      anonymousPerMinute: 2,
      clock,
    });
    expect(keys).toBeInstanceOf(MemoryKeyLimiter);
    expect(await keys.consume({ keyId: 'k1' }, limits)).toMatchObject({ outcome: 'allowed', now: clock.now() });
    await addresses.consume('203.0.113.7');
    await addresses.consume('203.0.113.7');
    expect((await addresses.consume('203.0.113.7')).allowed).toBe(false);
    await keys.close();
  });

  it('builds Redis limiters sharing the client and namespace', async () => {
    const namespace = uniqueNamespace('factory');
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 12));
    const {
      keyLimiter: keys,
      addressLimiter: addresses,
      health,
    } = createLimiters({ redis: client, namespace, ban, anonymousPerMinute: 30, clock, failMode: 'closed' });
    expect(keys).toBeInstanceOf(RedisKeyLimiter);
    expect(health).toBeNull();
    // An injected clock other than the system's reaches the script (tests drive Redis windows with it).
    expect(await keys.consume({ keyId: 'k1' }, limits)).toMatchObject({ outcome: 'allowed', now: clock.now() });
    expect(await client.exists(keyLimiterRedisKey(namespace, 'k1'))).toBe(1);
    expect((await addresses.consume('203.0.113.7')).allowed).toBe(true);
    expect(await client.exists(`${namespace}:rl:addr:203.0.113.7`)).toBe(1);
    await keys.close();
    expect(await client.ping()).toBe('PONG');
  });

  it('wraps the Redis limiters with the in-process fallback in modes local (the default) and open', async () => {
    for (const failMode of [undefined, 'local', 'open'] as const) {
      const limiters = createLimiters({
        redis: client,
        namespace: uniqueNamespace('factory-fallback'),
        ban,
        anonymousPerMinute: 30,
        failMode,
      });
      expect(limiters.keyLimiter).toBeInstanceOf(FallbackKeyLimiter);
      expect(limiters.health?.degraded).toBe(false);
      expect((await limiters.keyLimiter.consume({ keyId: 'k1' }, limits)).fallback).toBeUndefined();
      await limiters.close();
    }
  });

  it('leaves time to Redis when given the system clock, so every instance decides on one clock', async () => {
    const namespace = uniqueNamespace('factory-time');
    const { keyLimiter: keys } = createLimiters({
      redis: client,
      namespace,
      ban,
      anonymousPerMinute: 30,
      clock: systemClock,
    });
    const monitor = await (client as Redis).monitor();
    const sent = new Promise<string[]>((resolve) => {
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (source !== 'lua' && args.some((a) => a.includes(namespace))) resolve(args);
      });
    });
    try {
      await keys.consume({ keyId: 'k1' }, limits);
      const args = await sent;
      // EVAL(SHA), script, key count, the key, its month hash and its in-flight leases, then the
      // twelve ARGV of a TIME-clocked call: `now` (the eighth) empty, the cost, and no lease.
      const argv = args.slice(6);
      expect(argv).toHaveLength(12);
      expect(argv[7]).toBe('');
    } finally {
      monitor.disconnect();
    }
  });
});
