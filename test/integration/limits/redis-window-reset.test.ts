import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { RedisKeyLimiter } from '../../../src/limits/redis/redis-key-limiter';
import type {
  ConsumerShare,
  KeyDecision,
  KeyLimiter,
  KeyRef,
  WindowLimits,
  WindowsHeld,
} from '../../../src/limits/types';
import { describeWindowResetBehaviours } from '../../unit/limits/window-reset-behaviours';
import { NO_BAN } from '../../unit/limits/minute-window-behaviours';
import { useRedisPerFile } from '../../support/redis-per-file';
import { uniqueNamespace } from '../../support/test-redis';

// A window reset is one script on Redis: Redis runs it between two consumes, whichever instance sends them.

const redis = useRedisPerFile();
const clients: RedisClient[] = [];

beforeAll(async () => {
  // Exactness across two clients needs Redis answering (docs/testing.md, rule 5).
  for (let i = 0; i < 2; i++)
    clients.push(await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 }));
}, 60_000);

afterAll(async () => {
  for (const client of clients) await client.quit();
});

describeWindowResetBehaviours('RedisKeyLimiter', {
  create: (clock, ban, shape) =>
    new RedisKeyLimiter(clients[0]!, { namespace: uniqueNamespace('reset'), ban, clock, minuteWindow: shape }),
});

/** Units used of each window, from what the limiter answers now. */
async function usedNow(
  limiter: KeyLimiter,
  key: KeyRef,
  limits: WindowLimits,
  consumer?: ConsumerShare,
): Promise<WindowsHeld & { consumer?: WindowsHeld }> {
  const usage = await limiter.usage(key, limits);
  const used: WindowsHeld & { consumer?: WindowsHeld } = {
    minute: usage.minute.limit - usage.minute.remaining,
    day: usage.day.limit - usage.day.remaining,
    month: usage.month!.limit - usage.month!.remaining,
  };
  if (consumer) {
    const windows = await limiter.consumerUsage(consumer);
    used.consumer = {
      minute: windows.minute!.limit - windows.minute!.remaining,
      day: windows.day!.limit - windows.day!.remaining,
      month: windows.month!.limit - windows.month!.remaining,
    };
  }
  return used;
}

describe('RedisKeyLimiter: a reset among concurrent requests of two instances', () => {
  for (const shape of ['fixed', 'sliding'] as const) {
    it(`every admitted request is counted wholly before the reset or wholly after it, in every window (${shape} minute, Redis TIME)`, async () => {
      const namespace = uniqueNamespace('reset-race');
      const [a, b] = clients.map(
        (client) => new RedisKeyLimiter(client, { namespace, ban: NO_BAN, minuteWindow: shape }),
      );
      const consumer: ConsumerShare = {
        id: 'con_' + 'r'.repeat(24),
        limits: { perMinute: 100_000, perDay: 100_000, perMonth: 100_000 },
        billingDay: 1,
      };
      const keyId = { keyId: 'key_race', consumerId: consumer.id };
      const limits: WindowLimits = { perMinute: 100_000, perDay: 100_000, perMonth: 100_000 };
      const calls: Promise<KeyDecision>[] = [];
      let keyHeld: Promise<WindowsHeld> | undefined;
      let consumerHeld: Promise<WindowsHeld> | undefined;
      for (let i = 0; i < 400; i++) {
        calls.push((i % 2 === 0 ? a! : b!).consume(keyId, limits, { consumer }));
        // Sent while about 200 are still on their way, from each instance one.
        if (i === 200) {
          keyHeld = a!.resetWindows(keyId, ['minute', 'day', 'month']);
          consumerHeld = b!.resetConsumerWindows(consumer, ['minute', 'day', 'month']);
        }
      }
      const decisions = await Promise.all(calls);
      expect(decisions.every((d) => d.outcome === 'allowed')).toBe(true);
      const [heldByKey, heldByConsumer] = await Promise.all([keyHeld!, consumerHeld!]);
      const after = await usedNow(a!, keyId, limits, consumer);
      // A minute boundary between the first and the last would split the fixed minute: say so rather than fail wrongly.
      const sameMinute = decisions.every((d) => Math.floor(d.now / 60_000) === Math.floor(decisions[0]!.now / 60_000));
      for (const window of ['day', 'month', ...(sameMinute ? ['minute' as const] : [])] as const) {
        expect({ window, total: heldByKey[window]! + after[window]! }).toEqual({ window, total: 400 });
        expect({ window, total: heldByConsumer[window]! + after.consumer![window]! }).toEqual({ window, total: 400 });
      }
      // Some on each side: the reset really was among them.
      expect(heldByKey.day).toBeGreaterThan(0);
      expect(after.day).toBeGreaterThan(0);
    });
  }
});
