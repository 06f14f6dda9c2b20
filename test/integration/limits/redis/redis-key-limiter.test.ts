import type Redis from 'ioredis';
import { ManualClock } from '../../../../src/shared/clock';
import { connectRedis, type RedisClient } from '../../../../src/shared/redis/redis';
import { RedisKeyLimiter } from '../../../../src/limits/redis/redis-key-limiter';
import {
  activeBansRedisKey,
  keyLimiterRedisKey,
  leasesRedisKey,
  monthRedisKey,
} from '../../../../src/limits/redis/redis-names';
import type { KeyDecision, KeyRef, WindowLimits } from '../../../../src/limits/types';
import { DAY_MS, minuteIndex, windowEnd } from '../../../../src/limits/windows/windows';
import { DEFAULT_BAN, consumeTimes, describeKeyLimiterBehaviours } from '../../../unit/limits/key-limiter-behaviours';
import { uniqueNamespace } from '../../../support/test-redis';
import { eventually } from '../../../support/eventually';
import { useRedisPerFile } from '../../../support/redis-per-file';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- cluster-key-slot ships no types
const calculateSlot: (key: string) => number = require('cluster-key-slot');

// A Redis of this file's own: MONITOR on the shared test Redis, busy with the other suites, trips
// ioredis's reply bookkeeping ("Command queue state error", redis/ioredis#1981).
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

describeKeyLimiterBehaviours('RedisKeyLimiter (injected clock)', {
  create: (clock, ban) => new RedisKeyLimiter(client, { namespace: uniqueNamespace('kl'), ban, clock }),
});

interface SeenCommand {
  source: string;
  args: string[];
}

/**
 * Runs `action` and returns every command Redis executed that mentions `needle`, as MONITOR saw it:
 * what the client sent (source = its address) and what scripts ran inside Redis (source = "lua").
 * An ECHO of a marker after the action tells when MONITOR has shown everything before it.
 */
async function commandsSeenByRedis(needle: string, action: () => Promise<unknown>): Promise<SeenCommand[]> {
  const monitor = await (client as Redis).monitor();
  const seen: SeenCommand[] = [];
  const marker = `end-of-${needle}-${Math.random()}`;
  const finished = new Promise<void>((resolve) => {
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (args[0]?.toLowerCase() === 'echo' && args[1] === marker) resolve();
      else if (args.some((arg) => arg.includes(needle))) seen.push({ source, args });
    });
  });
  try {
    await action();
    await client.echo(marker);
    await finished;
  } finally {
    monitor.disconnect();
  }
  return seen;
}

const fromClient = (commands: SeenCommand[]) => commands.filter((c) => c.source !== 'lua');
const insideScripts = (commands: SeenCommand[]) => commands.filter((c) => c.source === 'lua');

/** Allowed decisions per UTC minute: what a window may admit is decided minute by minute. */
function allowedByMinute(decisions: KeyDecision[]): Map<number, { requests: number; allowed: number }> {
  const byMinute = new Map<number, { requests: number; allowed: number }>();
  for (const d of decisions) {
    const m = minuteIndex(d.now);
    const entry = byMinute.get(m) ?? { requests: 0, allowed: 0 };
    entry.requests += 1;
    if (d.outcome === 'allowed') entry.allowed += 1;
    byMinute.set(m, entry);
  }
  return byMinute;
}

describe('RedisKeyLimiter: exactness across instances', () => {
  const limits: WindowLimits = { perMinute: 60, perDay: 1000 };

  async function race(a: RedisKeyLimiter, b: RedisKeyLimiter, keyId: string): Promise<KeyDecision[]> {
    const calls: Promise<KeyDecision>[] = [];
    for (let i = 0; i < 200; i++) calls.push((i % 2 === 0 ? a : b).consume({ keyId }, limits));
    return Promise.all(calls);
  }

  it('admits exactly 60 of 200 concurrent requests split over two instances on their own connections (injected clock)', async () => {
    const namespace = uniqueNamespace('exact');
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 30));
    const a = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN, clock });
    const b = new RedisKeyLimiter(otherClient, { namespace, ban: DEFAULT_BAN, clock });
    const decisions = await race(a, b, 'k1');

    const count = (outcome: KeyDecision['outcome']) => decisions.filter((d) => d.outcome === outcome).length;
    expect(count('allowed')).toBe(60);
    // The refusals were counted atomically too: threshold + 1 refusals, the last one banning, then bans.
    expect(count('limited')).toBe(11);
    expect(decisions.filter((d) => d.outcome === 'limited' && d.bannedNow)).toHaveLength(1);
    expect(count('banned')).toBe(129);
    expect((await a.usage({ keyId: 'k1' }, limits)).minute.remaining).toBe(0);
    expect((await b.usage({ keyId: 'k1' }, limits)).day.remaining).toBe(940);
  });

  it('admits exactly 60 per minute with Redis TIME as the clock', async () => {
    const namespace = uniqueNamespace('exact-time');
    const a = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN });
    const b = new RedisKeyLimiter(otherClient, { namespace, ban: DEFAULT_BAN });
    const decisions = await race(a, b, 'k1');

    // All 200 almost always land in one minute (exactly 60 admitted); should a minute boundary fall
    // inside the burst, each minute admits exactly min(60, its requests).
    const byMinute = allowedByMinute(decisions);
    for (const { requests, allowed } of byMinute.values()) expect(allowed).toBe(Math.min(60, requests));
    if (byMinute.size === 1) expect(decisions.filter((d) => d.outcome === 'allowed')).toHaveLength(60);
  });

  it('admits exactly the day limit of 200 concurrent requests over two instances (Redis TIME)', async () => {
    const namespace = uniqueNamespace('exact-day');
    const dayLimits = { perMinute: 1000, perDay: 60 };
    const a = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN });
    const b = new RedisKeyLimiter(otherClient, { namespace, ban: DEFAULT_BAN });
    const calls: Promise<KeyDecision>[] = [];
    for (let i = 0; i < 200; i++) calls.push((i % 2 === 0 ? a : b).consume({ keyId: 'k1' }, dayLimits));
    const decisions = await Promise.all(calls);
    expect(decisions.filter((d) => d.outcome === 'allowed')).toHaveLength(60);
    const refusals = decisions.filter((d) => d.outcome === 'limited');
    expect(refusals.every((d) => d.outcome === 'limited' && d.refusedBy === 'day')).toBe(true);
  });
});

describe('RedisKeyLimiter: month window across instances', () => {
  it('admits exactly the month limit of 200 concurrent requests over two instances (Redis TIME)', async () => {
    const namespace = uniqueNamespace('exact-month');
    const monthLimits = { perMinute: 1000, perDay: 1000, perMonth: 50 };
    const a = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN });
    const b = new RedisKeyLimiter(otherClient, { namespace, ban: DEFAULT_BAN });
    const calls: Promise<KeyDecision>[] = [];
    for (let i = 0; i < 200; i++)
      calls.push((i % 2 === 0 ? a : b).consume({ keyId: 'k1' }, monthLimits, { billingDay: 28 }));
    const decisions = await Promise.all(calls);
    expect(decisions.filter((d) => d.outcome === 'allowed')).toHaveLength(50);
    expect((await a.usage({ keyId: 'k1' }, monthLimits, 28)).month!.remaining).toBe(0);
  });

  it('never admits more than the month limit under concurrent cost-3 requests: 16 of 100 fit in 50 units', async () => {
    const namespace = uniqueNamespace('exact-month-cost');
    const monthLimits = { perMinute: 1000, perDay: 1000, perMonth: 50 };
    const a = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN });
    const b = new RedisKeyLimiter(otherClient, { namespace, ban: DEFAULT_BAN });
    const calls: Promise<KeyDecision>[] = [];
    for (let i = 0; i < 100; i++) calls.push((i % 2 === 0 ? a : b).consume({ keyId: 'k1' }, monthLimits, { cost: 3 }));
    const decisions = await Promise.all(calls);
    expect(decisions.filter((d) => d.outcome === 'allowed')).toHaveLength(16);
    const usage = await a.usage({ keyId: 'k1' }, monthLimits);
    expect([usage.month!.remaining, usage.day.remaining, usage.minute.remaining]).toEqual([2, 952, 952]);
  });

  it('keeps the month hash until the end of the billing month, not longer', async () => {
    const namespace = uniqueNamespace('month-ttl');
    const now = Date.UTC(2026, 2, 15, 12);
    const limiter = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN, clock: new ManualClock(now) });
    await limiter.consume({ keyId: 'k1' }, { perMinute: 10, perDay: 10, perMonth: 10 }, { billingDay: 20 });
    const ttl = await client.pttl(monthRedisKey(namespace, 'k1'));
    const untilEnd = Date.UTC(2026, 2, 20) - now;
    expect(ttl).toBeGreaterThan(untilEnd - 5_000);
    expect(ttl).toBeLessThanOrEqual(untilEnd + 1_000);
    expect(calculateSlot(monthRedisKey(namespace, 'k1'))).toBe(calculateSlot(keyLimiterRedisKey(namespace, 'k1')));
    // What a month window costs in Redis (docs/redis.md): a small hash of three integers.
    await limiter.addCredits({ keyId: 'k1' }, 1_000, 20);
    const bytes = Number(await client.call('MEMORY', 'USAGE', monthRedisKey(namespace, 'k1'), 'SAMPLES', '0'));
    console.log(`MEMORY USAGE of a month window's hash (count and credits): ${bytes} bytes`);
    expect(bytes).toBeLessThan(200);
  });

  it('writes no month hash for a key without a month window', async () => {
    const namespace = uniqueNamespace('no-month');
    const limiter = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN });
    await limiter.consume({ keyId: 'k1' }, { perMinute: 10, perDay: 10 });
    expect(await client.exists(monthRedisKey(namespace, 'k1'))).toBe(0);
    expect(await client.exists(keyLimiterRedisKey(namespace, 'k1'))).toBe(1);
  });
});

describe('RedisKeyLimiter: Redis TIME as the clock', () => {
  it('decides on Redis’s time and refuses with the wait until the binding window ends', async () => {
    const limiter = new RedisKeyLimiter(client, { namespace: uniqueNamespace('time'), ban: DEFAULT_BAN });
    const limits = { perMinute: 1000, perDay: 3 };
    const before = Date.now();
    const decisions = await consumeTimes(limiter, 'k1', limits, 4);
    const after = Date.now();

    // Redis runs on this machine: its TIME is this process's clock give or take scheduling.
    for (const d of decisions) {
      expect(d.now).toBeGreaterThanOrEqual(before - 1000);
      expect(d.now).toBeLessThanOrEqual(after + 1000);
    }
    expect(decisions.slice(0, 3).map((d) => d.outcome)).toEqual(['allowed', 'allowed', 'allowed']);
    const refused = decisions[3]!;
    if (refused.outcome !== 'limited') throw new Error(`expected limited, got ${refused.outcome}`);
    expect(refused.refusedBy).toBe('day');
    expect(refused.day.resetAt).toBe(windowEnd(refused.now, DAY_MS));
    expect(refused.retryAfterMs).toBe(refused.day.resetAt - refused.now);

    const usage = await limiter.usage({ keyId: 'k1' }, limits);
    expect(usage.day.remaining).toBe(0);
    expect(usage.bannedUntil).toBeNull();
  });

  it('expires a key’s state after its day plus the ban retention, relative to Redis’s time', async () => {
    const namespace = uniqueNamespace('ttl');
    const limiter = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN });
    const decision = await limiter.consume({ keyId: 'k1' }, { perMinute: 5, perDay: 5 });
    const ttl = await client.pttl(keyLimiterRedisKey(namespace, 'k1'));
    const expected = windowEnd(decision.now, DAY_MS) - decision.now + 901_000;
    expect(ttl).toBeGreaterThan(expected - 5_000);
    expect(ttl).toBeLessThanOrEqual(expected);
  });

  it('gives a state a TTL with an injected clock too, so nothing is kept forever', async () => {
    const namespace = uniqueNamespace('ttl-injected');
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 23, 0));
    const limiter = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN, clock });
    await consumeTimes(limiter, 'k1', { perMinute: 1, perDay: 5 }, 3);
    const ttl = await client.pttl(keyLimiterRedisKey(namespace, 'k1'));
    expect(ttl).toBeGreaterThan(3_600_000);
    expect(ttl).toBeLessThanOrEqual(3_600_000 + 901_000);
  });
});

describe('RedisKeyLimiter: round trips and key slots', () => {
  it('sends exactly one command per consume and per usage, on a fresh connection and a warm one', async () => {
    const namespace = uniqueNamespace('trips');
    const fresh = await connect();
    try {
      const limiter = new RedisKeyLimiter(fresh, { namespace, ban: DEFAULT_BAN });
      const limits = { perMinute: 2, perDay: 100 };
      // First use on a connection sends the script (EVAL), later ones its SHA (EVALSHA).
      const first = fromClient(await commandsSeenByRedis(namespace, () => limiter.consume({ keyId: 'k1' }, limits)));
      expect(first.map((c) => c.args[0]!.toLowerCase())).toEqual(['eval']);
      for (const action of [
        () => limiter.consume({ keyId: 'k1' }, limits), // allowed
        () => limiter.consume({ keyId: 'k1' }, limits), // limited
        () => limiter.usage({ keyId: 'k1' }, limits),
        () => limiter.usage({ keyId: 'k1' }, limits),
      ]) {
        const commands = fromClient(await commandsSeenByRedis(namespace, action));
        expect(commands).toHaveLength(1);
        expect(['eval', 'evalsha']).toContain(commands[0]!.args[0]!.toLowerCase());
      }
      const warm = fromClient(await commandsSeenByRedis(namespace, () => limiter.consume({ keyId: 'k1' }, limits)));
      expect(warm.map((c) => c.args[0]!.toLowerCase())).toEqual(['evalsha']);
    } finally {
      await fresh.quit();
    }
  });

  it('touches only keys in the key id’s slot, on every path of the script', async () => {
    const namespace = uniqueNamespace('slots');
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 12));
    const limiter = new RedisKeyLimiter(client, {
      namespace,
      ban: { threshold: 1, windowSeconds: 60, durationSeconds: 60 },
      clock,
    });
    const limits = { perMinute: 1, perDay: 100 };
    const keyId = 'key-7f3a';
    const seen = await commandsSeenByRedis(namespace, async () => {
      await limiter.consume({ keyId }, limits); // allowed, new day
      await limiter.consume({ keyId }, limits); // limited, first refusal
      await limiter.consume({ keyId }, limits); // limited, bans
      await limiter.consume({ keyId }, limits); // banned
      await limiter.usage({ keyId }, limits);
      await limiter.unban({ keyId });
      clock.advance(60_000);
      await limiter.consume({ keyId }, limits); // allowed, same day
    });

    const inner = insideScripts(seen);
    expect(new Set(inner.map((c) => c.args[0]!.toLowerCase()))).toEqual(new Set(['hmget', 'hset', 'hdel', 'pexpire']));
    const slot = calculateSlot(keyId);
    const touched = new Set<string>();
    const gaugeCommands: string[] = [];
    for (const c of seen) {
      const name = c.args[0]!.toLowerCase();
      // The active-bans set is written on its own, outside the script, when a ban starts or is lifted.
      if (c.args[1] === activeBansRedisKey(namespace)) {
        gaugeCommands.push(name);
        continue;
      }
      // EVAL/EVALSHA name their keys after the script and the key count; other commands first.
      const keys = name === 'eval' || name === 'evalsha' ? c.args.slice(3, 3 + Number(c.args[2])) : [c.args[1]!];
      for (const key of keys) touched.add(key);
    }
    // The month hash and the in-flight leases are declared to every consume (read only when the
    // limits have perMonth, the request a maxInFlight).
    expect([...touched]).toEqual([
      keyLimiterRedisKey(namespace, keyId),
      monthRedisKey(namespace, keyId),
      `${keyLimiterRedisKey(namespace, keyId)}:if`,
    ]);
    for (const key of touched) expect(calculateSlot(key)).toBe(slot);
    expect(gaugeCommands).toEqual(['zadd', 'zrem']);
  });

  it('counts active bans for the gauge: added when a ban starts, gone when lifted or over', async () => {
    const namespace = uniqueNamespace('active-bans');
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 12));
    const limiter = new RedisKeyLimiter(client, {
      namespace,
      ban: { threshold: 1, windowSeconds: 60, durationSeconds: 60 },
      clock,
    });
    const limits = { perMinute: 1, perDay: 100 };
    expect(await limiter.activeBans()).toBe(0);
    for (const keyId of ['a', 'b']) {
      const decisions = [];
      for (let i = 0; i < 3; i++) decisions.push(await limiter.consume({ keyId }, limits));
      expect(decisions.map((d) => d.outcome)).toEqual(['allowed', 'limited', 'limited']);
    }
    // The set is written without waiting; poll it briefly.
    await eventually(async () => (await limiter.activeBans()) >= 2, { what: 'both bans in the set' });
    expect(await limiter.activeBans()).toBe(2);
    await limiter.unban({ keyId: 'a' });
    expect(await limiter.activeBans()).toBe(1);
    clock.advance(60_001);
    expect(await limiter.activeBans()).toBe(0);
  });

  it('passes now to the script only with an injected clock', async () => {
    const namespace = uniqueNamespace('argv');
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 12));
    const withClock = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN, clock });
    const withTime = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN });
    const limits = { perMinute: 5, perDay: 5 };
    const seen = fromClient(
      await commandsSeenByRedis(namespace, async () => {
        await withClock.consume({ keyId: 'a' }, limits);
        await withTime.consume({ keyId: 'b' }, limits);
      }),
    );
    expect(seen).toHaveLength(2);
    // key count 3, the key, its month hash and its in-flight leases, then ARGV: limits, ban,
    // retention, shadow, now, cost, and the lease (three empty places without maxInFlight).
    expect(seen[0]!.args.slice(3, 6)).toEqual([
      keyLimiterRedisKey(namespace, 'a'),
      monthRedisKey(namespace, 'a'),
      `${keyLimiterRedisKey(namespace, 'a')}:if`,
    ]);
    expect(seen[0]!.args.slice(6)).toEqual([
      ...seen[0]!.args.slice(6, 13),
      String(Date.UTC(2026, 0, 1, 12)),
      '1',
      '',
      '',
      '',
    ]);
    // With Redis TIME, `now` is empty.
    expect(seen[1]!.args.slice(6)).toEqual([...seen[1]!.args.slice(6, 13), '', '1', '', '', '']);
  });
});

describe('RedisKeyLimiter: maxInFlight releases cost no round trip on the request path', () => {
  const limits: WindowLimits = { perMinute: 100_000, perDay: 1_000_000 };
  // A lease ttl far beyond any wait here: a slot these tests see freed was released, never expired.
  const LONG_TTL_MS = 600_000;
  const lease = (max: number, id: string) => ({ inFlight: { max, id, ttlMs: LONG_TTL_MS } });
  const leasesKey = leasesRedisKey;
  const isScriptCall = (c: SeenCommand) => ['evalsha', 'eval'].includes(c.args[0]!.toLowerCase());

  for (const shape of [
    { name: 'fixed minute', minuteWindow: 'fixed' as const, limits },
    {
      name: 'fixed minute with a month window',
      minuteWindow: 'fixed' as const,
      limits: { ...limits, perMonth: 10_000_000 },
    },
    { name: 'sliding minute', minuteWindow: 'sliding' as const, limits },
  ]) {
    it(`admits every request of a one-at-a-time client below half of maxInFlight (4), each release carried by its next consume in the same script (${shape.name})`, async () => {
      const namespace = uniqueNamespace('if-serial');
      // The timed batch far away, so that the last release (no consume after it) waits for close().
      const limiter = new RedisKeyLimiter(client, {
        namespace,
        ban: DEFAULT_BAN,
        minuteWindow: shape.minuteWindow,
        releaseFlushMs: 600_000,
      });
      const REQUESTS = 40;
      const outcomes: string[] = [];
      const seen = await commandsSeenByRedis(namespace, async () => {
        for (let i = 0; i < REQUESTS; i++) {
          const decision = await limiter.consume({ keyId: 'k' }, shape.limits, lease(4, `l${i}`));
          outcomes.push(decision.outcome);
          limiter.release({ keyId: 'k' }, `l${i}`);
        }
      });
      expect(outcomes).toEqual(Array(REQUESTS).fill('allowed'));
      // One script call per request and nothing else from the client: the release went inside the next script.
      // (EVAL the first time on a connection, as ioredis sends a script Redis has not cached yet.)
      expect(fromClient(seen).map((c) => (isScriptCall(c) ? 'script' : c.args[0]!.toLowerCase()))).toEqual(
        Array(REQUESTS).fill('script'),
      );
      expect(insideScripts(seen).filter((c) => c.args[0]!.toLowerCase() === 'zrem')).toHaveLength(REQUESTS - 1);
      // The last release waits for the batch (or close); it is in Redis once sent.
      await limiter.close();
      expect(await client.zcard(leasesKey(namespace, 'k'))).toBe(0);
    });
  }

  it('makes one round trip per request under load: 16 clients at once (8 on a plain key, 8 on a key of a consumer), every release carried, none refused at maxInFlight 1000', async () => {
    const namespace = uniqueNamespace('if-load');
    const limiter = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN, releaseFlushMs: 600_000 });
    const CLIENTS = 8;
    const EACH = 25;
    const consumer = { id: 'con_if', limits: { perMinute: 100_000, perDay: 1_000_000 } };
    const outcomes: string[] = [];
    const ofConsumer: KeyRef = { keyId: 'of-consumer', consumerId: consumer.id };
    const runClient = async (key: KeyRef, c: number, extra: object) => {
      for (let i = 0; i < EACH; i++) {
        const id = `c${c}-${i}`;
        outcomes.push((await limiter.consume(key, limits, { ...lease(1000, id), ...extra })).outcome);
        limiter.release(key, id);
      }
    };
    const seen = await commandsSeenByRedis(namespace, () =>
      Promise.all(
        Array.from({ length: CLIENTS }, (_, c) => [
          runClient({ keyId: 'plain' }, c, {}),
          runClient(ofConsumer, c, { consumer }),
        ]).flat(),
      ),
    );
    const requests = 2 * CLIENTS * EACH;
    expect(outcomes).toEqual(Array(requests).fill('allowed'));
    const sent = fromClient(seen);
    expect(sent.filter(isScriptCall)).toHaveLength(requests);
    expect(sent.filter((c) => !isScriptCall(c))).toEqual([]);
    await limiter.close();
    expect(await client.zcard(leasesKey(namespace, 'plain'))).toBe(0);
    expect(await client.zcard(leasesKey(namespace, ofConsumer))).toBe(0);
  });

  it('sends a release no later request carries in one batch, off the request path, with no further request', async () => {
    const namespace = uniqueNamespace('if-flush');
    const limiter = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN });
    const keys = ['k1', 'k2', 'k3'];
    // maxInFlight 4, one lease held: below half, so its release waits for a consume or the batch.
    for (const keyId of keys)
      expect((await limiter.consume({ keyId }, limits, lease(4, `${keyId}-lease`))).outcome).toBe('allowed');
    for (const keyId of keys) expect(await client.zcard(leasesKey(namespace, keyId))).toBe(1);
    const seen = await commandsSeenByRedis(namespace, async () => {
      for (const keyId of keys) limiter.release({ keyId }, `${keyId}-lease`);
      // No consume follows: the batch timer alone takes the releases to Redis (the ttl is ten minutes away).
      await eventually(
        async () =>
          (await Promise.all(keys.map((keyId) => client.zcard(leasesKey(namespace, keyId))))).every((n) => n === 0),
        { timeoutMs: 10_000, pollMs: 5, what: 'the released leases are gone from Redis' },
      );
    });
    const sent = fromClient(seen).filter((c) => c.args[0]!.toLowerCase() !== 'zcard');
    expect(sent.map((c) => [c.args[0]!.toLowerCase(), c.args[1], c.args[2]])).toEqual(
      keys.map((keyId) => ['zrem', leasesKey(namespace, keyId), `${keyId}-lease`]),
    );
    // The freed slot admits the next request.
    expect((await limiter.consume({ keyId: 'k1' }, limits, lease(4, 'next'))).outcome).toBe('allowed');
  });

  for (const owner of [
    { name: 'a plain key', key: { keyId: 'k' }, extra: {} },
    {
      name: 'a key of a consumer',
      key: { keyId: 'k', consumerId: 'con_now' },
      extra: { consumer: { id: 'con_now', limits: { perMinute: 100_000, perDay: 1_000_000 }, billingDay: 1 } },
    },
  ]) {
    it(`releases at once, in a ZREM of its own not waited for, a lease taken at maxInFlight 1: one round trip on the request path, the slot free in Redis before the next request (${owner.name})`, async () => {
      const namespace = uniqueNamespace('if-now');
      const limiter = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN, releaseFlushMs: 600_000 });
      const REQUESTS = 20;
      const outcomes: string[] = [];
      const seen = await commandsSeenByRedis(namespace, async () => {
        for (let i = 0; i < REQUESTS; i++) {
          outcomes.push((await limiter.consume(owner.key, limits, { ...lease(1, `l${i}`), ...owner.extra })).outcome);
          limiter.release(owner.key, `l${i}`);
        }
        // The last ZREM was sent on this connection before the ZCARD: Redis ran it first.
        expect(await client.zcard(leasesKey(namespace, owner.key))).toBe(0);
      });
      expect(outcomes).toEqual(Array(REQUESTS).fill('allowed'));
      const sent = fromClient(seen).filter((c) => c.args[0]!.toLowerCase() !== 'zcard');
      expect(sent.map((c) => (isScriptCall(c) ? 'script' : `${c.args[0]!.toLowerCase()} ${c.args[2]}`))).toEqual(
        Array.from({ length: REQUESTS }, (_, i) => ['script', `zrem l${i}`]).flat(),
      );
      expect(insideScripts(seen).filter((c) => c.args[0]!.toLowerCase() === 'zrem')).toEqual([]);
    });
  }

  it('at maxInFlight 4 releases at once a lease taken with one already held (2 of 4: half), and holds back the first (1 of 4), which rides along', async () => {
    const namespace = uniqueNamespace('if-half');
    const limiter = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN, releaseFlushMs: 600_000 });
    expect((await limiter.consume({ keyId: 'k' }, limits, lease(4, 'first'))).outcome).toBe('allowed');
    expect((await limiter.consume({ keyId: 'k' }, limits, lease(4, 'second'))).outcome).toBe('allowed');
    const seen = await commandsSeenByRedis(namespace, async () => {
      limiter.release({ keyId: 'k' }, 'first');
      limiter.release({ keyId: 'k' }, 'second');
      // No consume follows and the batch is ten minutes away: only the release sent at once can empty the set.
      await eventually(async () => (await client.zcard(leasesKey(namespace, 'k'))) === 0, {
        timeoutMs: 10_000,
        pollMs: 5,
        what: 'both leases gone from Redis',
      });
    });
    // The first release waited (not sent alone); the second went at once and took the first along.
    const zrems = fromClient(seen).filter((c) => c.args[0]!.toLowerCase() === 'zrem');
    expect(zrems.map((c) => c.args.slice(1))).toEqual([[leasesKey(namespace, 'k'), 'second', 'first']]);
  });
});

describe('RedisKeyLimiter: store failures', () => {
  it('rejects with the store’s error when Redis cannot be reached, so the gateway applies its fail mode', async () => {
    const closed = await connect();
    const limiter = new RedisKeyLimiter(closed, { namespace: uniqueNamespace('down'), ban: DEFAULT_BAN });
    await closed.quit();
    await expect(limiter.consume({ keyId: 'k1' }, { perMinute: 5, perDay: 5 })).rejects.toThrow(Error);
    await expect(limiter.usage({ keyId: 'k1' }, { perMinute: 5, perDay: 5 })).rejects.toThrow(Error);
    await expect(limiter.unban({ keyId: 'k1' })).rejects.toThrow(Error);
  });
});
