import Redis from 'ioredis';
import { connectRedis, type RedisClient } from '../../../../src/shared/redis/redis';
import { createLimiters, type Limiters } from '../../../../src/limits';
import { isRedisUnavailable } from '../../../../src/shared/redis/redis-failures';
import { useRedisPerFile } from '../../../support/redis-per-file';
import { uniqueNamespace } from '../../../support/test-redis';

/**
 * A decision Redis runs after the gateway gave up on it counts nothing
 * (src/limits/redis/command-deadline.ts): Redis paused (CLIENT PAUSE, as a stalled primary) past
 * the command timeout, the consume fails on the client, and once Redis runs it the key's windows
 * are as they were. Before, the unit was counted anyway, for a request answered 503 or decided on
 * the fallback: under-admission for the rest of the window (the fault harness's 34 units of 720).
 */
const redis = useRedisPerFile();
const TIMEOUT_MS = 300;
const LIMITS = { perMinute: 1_000, perDay: 10_000 };
let client: RedisClient;
let pauser: Redis;
let limiters: Limiters;

beforeAll(async () => {
  client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: TIMEOUT_MS });
  pauser = new Redis(redis.url);
  limiters = createLimiters({
    redis: client,
    namespace: uniqueNamespace('deadline'),
    ban: { threshold: 100, windowSeconds: 60, durationSeconds: 60 },
    anonymousPerMinute: 60,
    failMode: 'closed',
    commandTimeoutMs: TIMEOUT_MS,
  });
});

afterAll(async () => {
  await limiters?.close();
  client?.disconnect();
  pauser?.disconnect();
});

test('a consume Redis runs after the client timed out counts nothing; the next one counts as before', async () => {
  const key = { keyId: `key_deadline_${Date.now()}` };
  const first = await limiters.keyLimiter.consume(key, LIMITS);
  expect(first.outcome).toBe('allowed');

  // Redis holds every client's commands for 1.2 s: the consume below times out after 300 ms.
  await pauser.call('CLIENT', 'PAUSE', '1200', 'ALL');
  const timedOut = await limiters.keyLimiter.consume(key, LIMITS).then(
    () => null,
    (err: unknown) => err,
  );
  expect(timedOut).toBeInstanceOf(Error);
  expect((timedOut as Error).message).toBe('Command timed out');
  expect(isRedisUnavailable(timedOut)).toBe(true);

  // Commands of one connection run in order: this read runs after the late consume did.
  const usage = await readUsageOnceResumed(key);
  expect(usage.minute.remaining).toBe(LIMITS.perMinute - 1);
  expect(usage.day.remaining).toBe(LIMITS.perDay - 1);

  const next = await limiters.keyLimiter.consume(key, LIMITS);
  expect(next.outcome).toBe('allowed');
  expect((await limiters.keyLimiter.usage(key, LIMITS)).minute.remaining).toBe(LIMITS.perMinute - 2);
});

test('a LATE refusal is an unavailable store to the gateway (503 or the fallback), never a 500', () => {
  expect(isRedisUnavailable(Object.assign(new Error('LATE 1764331200000'), { name: 'ReplyError' }))).toBe(true);
});

/** The key's usage, read once Redis runs commands again (a read sent during the pause times out too). */
async function readUsageOnceResumed(key: { keyId: string }) {
  for (;;) {
    try {
      return await limiters.keyLimiter.usage(key, LIMITS);
    } catch (err) {
      if ((err as Error).message !== 'Command timed out') throw err;
    }
  }
}
