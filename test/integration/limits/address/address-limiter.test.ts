import { ManualClock } from '../../../../src/shared/clock';
import { connectRedis, type RedisClient } from '../../../../src/shared/redis/redis';
import { createMemoryAddressLimiter, createRedisAddressLimiter } from '../../../../src/limits/address/address-limiter';
import type { AddressDecision, AddressLimiter } from '../../../../src/limits/types';
import { testRedisUrl, uniqueNamespace } from '../../../support/test-redis';

function connect(): Promise<RedisClient> {
  return connectRedis({ url: testRedisUrl(), clusterNodes: [], commandTimeoutMs: 5000 });
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

async function consumeTimes(limiter: AddressLimiter, address: string, times: number): Promise<AddressDecision[]> {
  const decisions: AddressDecision[] = [];
  for (let i = 0; i < times; i++) decisions.push(await limiter.consume(address));
  return decisions;
}

const stores: Array<[string, (perMinute: number, clock: ManualClock) => AddressLimiter]> = [
  ['in-process store', (perMinute, clock) => createMemoryAddressLimiter({ perMinute, clock })],
  [
    'Redis store',
    (perMinute, clock) => createRedisAddressLimiter(client, { namespace: uniqueNamespace('addr'), perMinute, clock }),
  ],
];

describe.each(stores)('address limiter, %s', (_name, create) => {
  const NOW = Date.UTC(2026, 0, 1, 12);

  it('allows anonymous.perMinute requests from one address, then refuses with a wait', async () => {
    const clock = new ManualClock(NOW);
    const limiter = create(30, clock);
    const served = await consumeTimes(limiter, '203.0.113.7', 30);
    served.forEach((d, i) => {
      expect(d.allowed).toBe(true);
      expect(d.retryAfterMs).toBe(0);
      expect(d.window.limit).toBe(30);
      expect(d.window.remaining).toBe(29 - i);
      expect(d.window.resetAt).toBeGreaterThan(NOW);
      expect(d.window.resetAt).toBeLessThanOrEqual(NOW + 60_000);
    });

    for (const refused of await consumeTimes(limiter, '203.0.113.7', 2)) {
      expect(refused.allowed).toBe(false);
      expect(refused.window.remaining).toBe(0);
      expect(refused.retryAfterMs).toBeGreaterThan(0);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(60_000);
      expect(refused.window.resetAt).toBe(NOW + refused.retryAfterMs);
    }
  });

  it('counts each address on its own', async () => {
    const limiter = create(2, new ManualClock(NOW));
    await consumeTimes(limiter, '203.0.113.7', 2);
    expect((await limiter.consume('203.0.113.7')).allowed).toBe(false);
    expect((await limiter.consume('203.0.113.8')).allowed).toBe(true);
    expect((await limiter.consume('2001:db8::1')).allowed).toBe(true);
    expect((await limiter.consume('2001:db8::1')).allowed).toBe(true);
    expect((await limiter.consume('2001:db8::1')).allowed).toBe(false);
  });
});

describe('address limiter, Redis store across instances', () => {
  it('shares one count per address between instances on their own connections', async () => {
    const namespace = uniqueNamespace('addr-shared');
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 12));
    const a = createRedisAddressLimiter(client, { namespace, perMinute: 30, clock });
    const b = createRedisAddressLimiter(otherClient, { namespace, perMinute: 30, clock });
    const calls: Promise<AddressDecision>[] = [];
    for (let i = 0; i < 80; i++) calls.push((i % 2 === 0 ? a : b).consume('198.51.100.4'));
    const decisions = await Promise.all(calls);
    expect(decisions.filter((d) => d.allowed)).toHaveLength(30);
    expect(await client.exists(`${namespace}:rl:addr:198.51.100.4`)).toBe(1);
  });

  it('rejects with an Error, not a refusal, when Redis cannot be reached', async () => {
    const closed = await connect();
    const limiter = createRedisAddressLimiter(closed, { namespace: uniqueNamespace('addr-down'), perMinute: 30 });
    await closed.quit();
    const outcome = await limiter.consume('203.0.113.7').then(
      (decision) => ({ resolved: decision }),
      (error: unknown) => ({ rejected: error }),
    );
    expect(outcome).toEqual({ rejected: expect.any(Error) });
  });
});
