import { ManualClock } from '../../../src/shared/clock';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { createRedisAddressLimiter } from '../../../src/limits/address/address-limiter';
import { RedisKeyLimiter } from '../../../src/limits/redis/redis-key-limiter';
import type { KeyDecision } from '../../../src/limits/types';
import { DEFAULT_BAN, describeKeyLimiterBehaviours } from '../../unit/limits/key-limiter-behaviours';
import { describeMinuteWindowBehaviours } from '../../unit/limits/minute-window-behaviours';
import { describeMonthWindowBehaviours } from '../../unit/limits/month-window-behaviours';
import { startRedisCluster, type RedisCluster } from '../../support/redis-cluster';
import { uniqueNamespace } from '../../support/test-redis';

// A Redis Cluster of three masters: Cluster rules apply (a script may only touch keys of one slot,
// declared in KEYS) and different key ids land on different masters, so commands are routed.

let cluster: RedisCluster;
let client: RedisClient;
let otherClient: RedisClient;

function connectCluster(): Promise<RedisClient> {
  return connectRedis({ url: null, clusterNodes: cluster.nodes, commandTimeoutMs: 5000 });
}

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3 });
  client = await connectCluster();
  otherClient = await connectCluster();
});

afterAll(async () => {
  await client?.quit();
  await otherClient?.quit();
  await cluster?.stop();
});

describeKeyLimiterBehaviours('RedisKeyLimiter on a Redis Cluster', {
  create: (clock, ban) => new RedisKeyLimiter(client, { namespace: uniqueNamespace('cl'), ban, clock }),
});

// The sliding minute's log sits beside the hash under the same hash tag: one slot, one script.
describeMinuteWindowBehaviours('RedisKeyLimiter on a Redis Cluster', {
  create: (clock, ban, shape) =>
    new RedisKeyLimiter(client, { namespace: uniqueNamespace('cl-shape'), ban, clock, minuteWindow: shape }),
});

// The month hash sits beside the key's hash under the same hash tag: one slot, one script.
describeMonthWindowBehaviours('RedisKeyLimiter on a Redis Cluster', {
  create: (clock, ban, shape) =>
    new RedisKeyLimiter(client, { namespace: uniqueNamespace('cl-month'), ban, clock, minuteWindow: shape }),
});

describe('RedisKeyLimiter on a Redis Cluster: exactness', () => {
  it('admits exactly a month limit of 50 of 200 concurrent cost-1 requests over two Cluster clients (Redis TIME)', async () => {
    const namespace = uniqueNamespace('cl-exact-month');
    const a = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN });
    const b = new RedisKeyLimiter(otherClient, { namespace, ban: DEFAULT_BAN });
    const monthLimits = { perMinute: 1000, perDay: 1000, perMonth: 50 };
    const calls: Promise<KeyDecision>[] = [];
    for (let i = 0; i < 200; i++)
      calls.push((i % 2 === 0 ? a : b).consume({ keyId: 'k-month' }, monthLimits, { billingDay: 7 }));
    const decisions = await Promise.all(calls);
    expect(decisions.filter((d) => d.outcome === 'allowed')).toHaveLength(50);
    // Refused by the month until the refusals ban the key (the default ban threshold).
    expect(decisions.every((d) => d.outcome !== 'limited' || d.refusedBy === 'month')).toBe(true);
  });

  it('admits exactly 60 of 200 concurrent requests over two Cluster clients (Redis TIME)', async () => {
    const namespace = uniqueNamespace('cl-exact');
    const a = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN });
    const b = new RedisKeyLimiter(otherClient, { namespace, ban: DEFAULT_BAN });
    const dayLimits = { perMinute: 1000, perDay: 60 };
    const calls: Promise<KeyDecision>[] = [];
    for (let i = 0; i < 200; i++) calls.push((i % 2 === 0 ? a : b).consume({ keyId: 'k1' }, dayLimits));
    const decisions = await Promise.all(calls);
    expect(decisions.filter((d) => d.outcome === 'allowed')).toHaveLength(60);
  });
});

describe('address limiter on a Redis Cluster', () => {
  it('allows the limit and refuses the next', async () => {
    const limiter = createRedisAddressLimiter(client, {
      namespace: uniqueNamespace('cl-addr'),
      perMinute: 3,
      clock: new ManualClock(),
    });
    const decisions = [];
    for (let i = 0; i < 4; i++) decisions.push(await limiter.consume('203.0.113.7'));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
    expect(decisions[3]!.retryAfterMs).toBeGreaterThan(0);
  });
});
