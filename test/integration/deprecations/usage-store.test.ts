import { ManualClock } from '../../../src/shared/clock';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { DeprecationUsage, type DeprecationUsageStore } from '../../../src/usage/deprecation-usage';
import { UsageRecorder } from '../../../src/usage/usage-recorder';
import { MemoryDeprecationUsageStore } from '../../../src/usage/memory-deprecation-usage-store';
import { RedisDeprecationUsageStore } from '../../../src/usage/redis-deprecation-usage-store';
import { testRedisUrl, uniqueNamespace } from '../../support/test-redis';

const DAY = 86_400_000;
const route = '/v1/pets/{petId}';
let redis: RedisClient;

beforeAll(async () => {
  redis = await connectRedis({ url: testRedisUrl(), clusterNodes: [], commandTimeoutMs: 1000 });
});
afterAll(async () => {
  redis.disconnect();
});

const stores: Array<[string, () => DeprecationUsageStore]> = [
  ['in process', () => new MemoryDeprecationUsageStore()],
  ['Redis', () => new RedisDeprecationUsageStore(redis, uniqueNamespace('depr'))],
];

describe.each(stores)('deprecated-operation callers (%s)', (_label, makeStore) => {
  it('counts calls per key with the latest call time, most recent caller first', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 1, 12));
    const usage = new UsageRecorder({ flushIntervalMs: 60_000 });
    const recorder = new DeprecationUsage(usage, makeStore(), clock);
    recorder.record(route, 'key_a');
    recorder.record(route, 'key_a');
    clock.advance(1000);
    recorder.record(route, 'key_b');
    clock.advance(DAY);
    recorder.record(route, 'key_a');
    const callers = await recorder.callers(route);
    expect(callers).toEqual([
      { keyId: 'key_a', count: 3, lastCallAt: clock.now() },
      { keyId: 'key_b', count: 1, lastCallAt: clock.now() - DAY },
    ]);
    await usage.close();
  });

  it('forgets callers and counts older than 30 days', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 1, 12));
    const usage = new UsageRecorder({ flushIntervalMs: 60_000 });
    const recorder = new DeprecationUsage(usage, makeStore(), clock);
    recorder.record(route, 'key_old');
    recorder.record(route, 'key_both');
    await recorder.flush();
    clock.advance(31 * DAY);
    recorder.record(route, 'key_both');
    const callers = await recorder.callers(route);
    expect(callers).toEqual([{ keyId: 'key_both', count: 1, lastCallAt: clock.now() }]);
    await usage.close();
  });

  it('keeps routes apart', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 1, 12));
    const usage = new UsageRecorder({ flushIntervalMs: 60_000 });
    const recorder = new DeprecationUsage(usage, makeStore(), clock);
    recorder.record(route, 'key_a');
    recorder.record('/v1/other', 'key_b');
    expect((await recorder.callers(route)).map((c) => c.keyId)).toEqual(['key_a']);
    expect((await recorder.callers('/v1/other')).map((c) => c.keyId)).toEqual(['key_b']);
    await usage.close();
  });
});

test('the Redis store keeps its keys under one hash tag per route and expires them', async () => {
  const namespace = uniqueNamespace('depr');
  const clock = new ManualClock(Date.UTC(2026, 10, 1, 12));
  const usage = new UsageRecorder({ flushIntervalMs: 60_000 });
  const recorder = new DeprecationUsage(usage, new RedisDeprecationUsageStore(redis, namespace), clock);
  recorder.record(route, 'key_a');
  await recorder.flush();
  const keys = await redis.keys(`${namespace}:*`);
  expect(keys.length).toBe(2);
  for (const key of keys) {
    expect(key).toContain(`{${route}}`);
    expect(await redis.pttl(key)).toBeGreaterThan(30 * DAY);
  }
  await usage.close();
});
