import type Redis from 'ioredis';
import { ManualClock } from '../../../src/shared/clock';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import {
  RedisKeyLimiter,
  keyLimiterRedisKey,
  monthRedisKey,
  slidingLogRedisKey,
} from '../../../src/limits/redis/redis-key-limiter';
import type { KeyDecision, MinuteWindowShape, WindowLimits } from '../../../src/limits/types';
import {
  describeMinuteWindowBehaviours,
  mostAdmittedInAnyMinute,
  NO_BAN,
} from '../../unit/limits/minute-window-behaviours';
import { describeMonthWindowBehaviours } from '../../unit/limits/month-window-behaviours';
import { uniqueNamespace } from '../../support/test-redis';
import { useRedisPerFile } from '../../support/redis-per-file';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- cluster-key-slot ships no types
const calculateSlot: (key: string) => number = require('cluster-key-slot');

// A Redis of this file's own: MONITOR on the shared test Redis, busy with the other workers' suites,
// trips ioredis's reply bookkeeping ("Command queue state error", redis/ioredis#1981), as it did for
// redis-key-limiter and create-limiters.
const redis = useRedisPerFile();

function connect(): Promise<RedisClient> {
  return connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 });
}

let client: RedisClient;
let otherClient: RedisClient;

beforeAll(async () => {
  client = await connect();
  otherClient = await connect();
});

afterAll(async () => {
  await client.quit();
  await otherClient.quit();
});

describeMinuteWindowBehaviours('RedisKeyLimiter (injected clock)', {
  create: (clock, ban, shape) =>
    new RedisKeyLimiter(client, { namespace: uniqueNamespace('shape'), ban, clock, minuteWindow: shape }),
});

describeMonthWindowBehaviours('RedisKeyLimiter (injected clock)', {
  create: (clock, ban, shape) =>
    new RedisKeyLimiter(client, { namespace: uniqueNamespace('month'), ban, clock, minuteWindow: shape }),
});

describe('RedisKeyLimiter, sliding minute: exactness across instances', () => {
  const limits: WindowLimits = { perMinute: 60, perDay: 1000 };

  function pair(shape: MinuteWindowShape, clock?: ManualClock): [RedisKeyLimiter, RedisKeyLimiter] {
    const namespace = uniqueNamespace('sliding-pair');
    return [
      new RedisKeyLimiter(client, { namespace, ban: NO_BAN, clock, minuteWindow: shape }),
      new RedisKeyLimiter(otherClient, { namespace, ban: NO_BAN, clock, minuteWindow: shape }),
    ];
  }

  async function race(a: RedisKeyLimiter, b: RedisKeyLimiter, count: number): Promise<KeyDecision[]> {
    return Promise.all(Array.from({ length: count }, (_, i) => (i % 2 === 0 ? a : b).consume({ keyId: 'k1' }, limits)));
  }

  const admittedAt = (decisions: KeyDecision[]) => decisions.filter((d) => d.outcome === 'allowed').map((d) => d.now);

  it('200 concurrent requests at :58 and 200 more at :02 on two instances: sliding admits 60, fixed 120 (injected clock)', async () => {
    const at58 = Date.UTC(2026, 0, 1, 12, 0, 58);
    const admitted: Record<MinuteWindowShape, number> = { fixed: 0, sliding: 0 };
    for (const shape of ['fixed', 'sliding'] as const) {
      const clock = new ManualClock(at58);
      const [a, b] = pair(shape, clock);
      const first = await race(a, b, 200);
      clock.set(at58 + 4_000);
      const second = await race(a, b, 200);
      admitted[shape] = admittedAt([...first, ...second]).length;
    }
    expect(admitted).toEqual({ fixed: 120, sliding: 60 });
  });

  it('200 concurrent requests on two instances with Redis TIME: exactly the limit, in no minute more', async () => {
    const [a, b] = pair('sliding');
    const decisions = await race(a, b, 200);
    const times = admittedAt(decisions);
    // Whatever the wall clock (a minute boundary may fall inside the burst), the sliding minute holds.
    expect(times).toHaveLength(60);
    expect(mostAdmittedInAnyMinute(times)).toBe(60);
    const refused = decisions.filter((d): d is Extract<KeyDecision, { outcome: 'limited' }> => d.outcome === 'limited');
    expect(refused).toHaveLength(140);
    // Every refusal waits for the oldest admission to be a minute old, as Redis timed it.
    const oldest = Math.min(...times);
    for (const d of refused) expect(d.retryAfterMs).toBe(oldest + 60_000 - d.now);
  });
});

describe('RedisKeyLimiter, sliding minute: one round trip, one slot', () => {
  it('sends one command per consume and per usage, and touches only the key id’s slot', async () => {
    const namespace = uniqueNamespace('sliding-trips');
    const fresh = await connect();
    const monitor = await (client as Redis).monitor();
    const seen: { source: string; args: string[] }[] = [];
    const marker = `end-${Math.random()}`;
    const finished = new Promise<void>((resolve) => {
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (args[0]?.toLowerCase() === 'echo' && args[1] === marker) resolve();
        else if (args.some((arg) => arg.includes(namespace))) seen.push({ source, args });
      });
    });
    try {
      const clock = new ManualClock(Date.UTC(2026, 0, 1, 12));
      const limiter = new RedisKeyLimiter(fresh, {
        namespace,
        ban: { threshold: 1, windowSeconds: 60, durationSeconds: 60 },
        clock,
        minuteWindow: 'sliding',
      });
      const limits = { perMinute: 1, perDay: 100 };
      await limiter.consume({ keyId: 'key-9' }, limits); // allowed
      await limiter.consume({ keyId: 'key-9' }, limits); // limited
      await limiter.usage({ keyId: 'key-9' }, limits);
      await limiter.consume({ keyId: 'key-9' }, limits); // limited, bans
      await limiter.consume({ keyId: 'key-9' }, limits); // banned
      await client.echo(marker);
      await finished;
    } finally {
      monitor.disconnect();
      await fresh.quit();
    }
    // The active-bans gauge set is written apart from the script when a ban starts (see redis-key-limiter.ts).
    const isGaugeWrite = (c: { args: string[] }) => c.args[1]?.endsWith(':rl:bans') === true;
    const fromClient = seen.filter((c) => c.source !== 'lua' && !isGaugeWrite(c));
    expect(seen.filter(isGaugeWrite).map((c) => c.args[0]!.toLowerCase())).toEqual(['zadd']);
    expect(fromClient.map((c) => c.args[0]!.toLowerCase())).toEqual(['eval', 'evalsha', 'eval', 'evalsha', 'evalsha']);
    const touched = new Set<string>();
    for (const c of seen) {
      const name = c.args[0]!.toLowerCase();
      const keys = name === 'eval' || name === 'evalsha' ? c.args.slice(3, 3 + Number(c.args[2])) : [c.args[1]!];
      if (!isGaugeWrite(c)) for (const key of keys) touched.add(key);
    }
    expect([...touched].sort()).toEqual(
      [
        keyLimiterRedisKey(namespace, 'key-9'),
        slidingLogRedisKey(namespace, 'key-9'),
        monthRedisKey(namespace, 'key-9'),
        `${keyLimiterRedisKey(namespace, 'key-9')}:if`,
      ].sort(),
    );
    for (const key of touched) expect(calculateSlot(key)).toBe(calculateSlot('key-9'));
  });

  it('the log expires a minute after its last admission', async () => {
    const namespace = uniqueNamespace('sliding-ttl');
    const limiter = new RedisKeyLimiter(client, { namespace, ban: NO_BAN, minuteWindow: 'sliding' });
    await limiter.consume({ keyId: 'k1' }, { perMinute: 5, perDay: 5 });
    const ttl = await client.pttl(slidingLogRedisKey(namespace, 'k1'));
    expect(ttl).toBeGreaterThan(55_000);
    expect(ttl).toBeLessThanOrEqual(61_000);
  });
});

describe('RedisKeyLimiter: memory per key at each plan’s limit (MEMORY USAGE)', () => {
  const plans = { free: 60, pro: 300, business: 1000 };

  async function bytesAtLimit(shape: MinuteWindowShape, perMinute: number): Promise<number> {
    const namespace = uniqueNamespace(`mem-${shape}`);
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 1));
    const limiter = new RedisKeyLimiter(client, { namespace, ban: NO_BAN, clock, minuteWindow: shape });
    const limits = { perMinute, perDay: 1_000_000 };
    // Spread over the minute, one ms apart at least, as real traffic would be.
    for (let i = 0; i < perMinute; i++) {
      clock.advance(Math.max(1, Math.floor(58_000 / perMinute)));
      await limiter.consume({ keyId: 'k1' }, limits);
    }
    let bytes = 0;
    for (const key of [keyLimiterRedisKey(namespace, 'k1'), slidingLogRedisKey(namespace, 'k1')]) {
      bytes += Number((await client.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
    }
    return bytes;
  }

  it('fixed keeps one small hash; sliding adds a log that grows with the limit', async () => {
    const measured: Record<string, { fixed: number; sliding: number }> = {};
    for (const [plan, perMinute] of Object.entries(plans)) {
      measured[plan] = {
        fixed: await bytesAtLimit('fixed', perMinute),
        sliding: await bytesAtLimit('sliding', perMinute),
      };
    }
    process.stdout.write(`MEMORY USAGE per key at the plan's limit (bytes): ${JSON.stringify(measured)}\n`);
    for (const { fixed, sliding } of Object.values(measured)) {
      expect(fixed).toBeLessThan(200);
      expect(sliding).toBeGreaterThan(fixed);
    }
    // Bounded by the limit: about 100 bytes an admission at worst, the figures the README gives.
    expect(measured.business!.sliding).toBeLessThan(1000 * 120);
    expect(measured.free!.sliding).toBeLessThan(60 * 60);
  });
});
