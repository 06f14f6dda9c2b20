import Redis, { Cluster } from 'ioredis';
import request from 'supertest';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { keyLimiterRedisKey } from '../../../src/limits';
import { redisKeyLayout } from '../../../src/keys/stores/redis-key-store';
import { DeprecationUsage } from '../../../src/usage/deprecation-usage';
import { UsageRecorder } from '../../../src/usage/usage-recorder';
import { RedisDeprecationUsageStore } from '../../../src/usage/redis-deprecation-usage-store';
import { ManualClock } from '../../../src/shared/clock';
import { startRedisCluster, type RedisCluster } from '../../support/redis-cluster';
import { uniqueNamespace } from '../../support/test-redis';
import {
  admin,
  expectRateLimitHeaders,
  header,
  startTestProduct,
  usageOf,
  type ProductHarness,
} from '../gateway/gateway-kit';
import { eventually } from '../../support/eventually';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/**
 * The whole product, twice (one namespace), on a Redis Cluster of three masters reached through
 * REDIS_CLUSTER_NODES: keys, their change notifications, key windows and bans, per-address limits
 * and the deprecated-callers store all run on ioredis's Cluster client with real slot routing (the
 * key-change subscriber on a plain connection to one master, see duplicateForSubscribe). Instance A
 * runs the inventory, B forwards to it. Windows follow Redis TIME (real clock).
 */
describe('the product on a three-master Redis Cluster', () => {
  const namespace = uniqueNamespace('cluster');
  let cluster: RedisCluster;
  let a: ProductHarness;
  let b: ProductHarness;
  /** Our own Cluster client for looking at what the product wrote. */
  let inspector: RedisClient;
  /** One plain connection per master, for what a single node holds. */
  let masters: Redis[];

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    // A line in the test output, not an assertion: how long the cluster took to come up.
    process.stdout.write(`redis cluster of 3 masters ready in ${cluster.startedInMs} ms\n`);
    const env = { REDIS_CLUSTER_NODES: cluster.nodes.join(',') };
    // Trusting loopback's X-Forwarded-For gives every test its own client address, so the small
    // anonymous limit of one test never holds back another.
    // A generous command timeout: this suite is about what the cluster decides, and on a busy
    // two-core machine the default 200 ms could send a limiter to its fallback mid-burst; 5 s, since
    // at load 20-27 the start's slots refresh (which takes the command timeout) ran out at 1 s.
    const overrides = {
      anonymous: { perMinute: 10 },
      server: { host: '127.0.0.1', trustedProxies: ['127.0.0.1'] },
      redis: { namespace, commandTimeoutMs: 5000 },
    };
    a = await startTestProduct({ redis: false, namespace, env, overrides });
    b = await startTestProduct({
      redis: false,
      namespace,
      env,
      overrides: { ...overrides, upstream: { url: a.inventory!.url } },
    });
    inspector = await connectRedis({ url: null, clusterNodes: cluster.nodes, commandTimeoutMs: 5000 });
    masters = cluster.ports.map(
      (port) => new Redis(port, '127.0.0.1', { lazyConnect: false, maxRetriesPerRequest: 1 }),
    );
  }, 120_000);

  afterAll(async () => {
    await b?.close();
    await a?.close();
    inspector?.disconnect();
    for (const master of masters ?? []) master.disconnect();
    await cluster?.stop();
  });

  let addressCounter = 0;
  /** A client address no other request of this suite used (documentation range 198.51.100.0/24). */
  function freshAddress(): string {
    addressCounter += 1;
    return `198.51.100.${addressCounter}`;
  }

  function get(product: ProductHarness, auth: string | null, address: string): request.Test {
    const req = request(product.gatewayUrl).get('/v1/pets?limit=1').set('X-Forwarded-For', address);
    return auth === null ? req : req.set('Authorization', auth);
  }

  async function storeErrors(product: ProductHarness): Promise<number> {
    const res = await request(product.adminUrl).get('/metrics').expect(200);
    const line = /^gateway_store_errors_total (\d+)$/m.exec(res.text);
    if (!line) throw new Error('gateway_store_errors_total is missing from /metrics');
    return Number(line[1]);
  }

  /** A day-limited burst must not straddle UTC midnight (Redis TIME decides the day). */
  async function awayFromDayEnd(): Promise<void> {
    const left = 86_400_000 - (Date.now() % 86_400_000);
    if (left < 5_000) await new Promise((resolve) => setTimeout(resolve, left + 100));
  }

  /** Keys under this suite's namespace that one master holds. */
  async function namespaceKeysOn(master: Redis, pattern: string): Promise<string[]> {
    const found: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await master.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      found.push(...keys);
      cursor = next;
    } while (cursor !== '0');
    return found;
  }

  it('runs on the cluster: both instances use REDIS_CLUSTER_NODES, and /readyz is 200 on both', async () => {
    for (const product of [a, b]) {
      expect(product.config.redis).toMatchObject({ url: null, clusterNodes: cluster.nodes });
      expect(product.logs.text()).not.toContain('in-process store');
      const ready = await request(product.adminUrl).get('/readyz').expect(200);
      // Each probes its durable copies under DATA_DIR; a runs the inventory itself, so it also probes the inventory's database.
      const copies = { 'key copy database': 'ok', 'consumer copy database': 'ok' };
      const checks =
        product === a
          ? { store: 'ok', ...copies, 'inventory database': 'ok', upstream: 'ok' }
          : { store: 'ok', ...copies, upstream: 'ok' };
      expect(ready.body).toEqual({ status: 'ready', checks, upstreamCircuit: 'closed' });
    }
  });

  it('connects to every master before serving, so no request waits for a connection', async () => {
    const client = await connectRedis({ url: null, clusterNodes: [cluster.nodes[0]!], commandTimeoutMs: 200 });
    try {
      expect(client).toBeInstanceOf(Cluster);
      const nodes = (client as Cluster).nodes('master');
      expect(nodes).toHaveLength(3);
      expect(nodes.map((node) => node.status)).toEqual(['ready', 'ready', 'ready']);
    } finally {
      client.disconnect();
    }
  });

  it('a key created on instance A is served on instance B', async () => {
    const { auth } = await createKey(a, { name: 'made on A', plan: 'free' }, { overApi: true });
    const res = await get(b, auth, freshAddress()).expect(200);
    expect(Array.isArray(res.body)).toBe(true);
    expect(expectRateLimitHeaders(res).policy).toBe('"minute";q=60;w=60, "day";q=1000;w=86400');
  });

  it('80 concurrent requests over both instances admit exactly a 30/day key’s 30; the rest are 429 with headers', async () => {
    const { id, auth } = await createKey(
      a,
      { name: 'burst', plan: 'enterprise', limits: { perMinute: 1000, perDay: 30 } },
      { overApi: true },
    );
    await awayFromDayEnd();
    const address = freshAddress();
    const responses = await Promise.all(
      Array.from({ length: 80 }, async (_, i) => {
        const instance = i % 2 === 0 ? a : b;
        const res = await get(instance, auth, address);
        return { res, instance: instance === a ? 'a' : 'b' };
      }),
    );
    const served = responses.filter((r) => r.res.status === 200);
    const refused = responses.filter((r) => r.res.status === 429);
    // Every decision came from the cluster, none from a fallback limiter.
    expect(await storeErrors(a)).toBe(0);
    expect(await storeErrors(b)).toBe(0);
    expect(served).toHaveLength(30);
    expect(refused).toHaveLength(50);
    expect(served.some((r) => r.instance === 'a') && served.some((r) => r.instance === 'b')).toBe(true);
    // One script call per consume decides refusals one at a time too: threshold (10) + 1 are
    // rate_limited, the last of them bans the key, the rest find it banned.
    const codes = refused.map((r) => (r.res.body as { code: string }).code);
    expect(codes.filter((c) => c === 'rate_limited')).toHaveLength(11);
    expect(codes.filter((c) => c === 'temporarily_banned')).toHaveLength(39);
    for (const { res } of refused) {
      expect(Number(header(res, 'retry-after'))).toBeGreaterThanOrEqual(1);
      expect(expectRateLimitHeaders(res).remaining).toBe(0);
    }
    for (const { res } of served) expect(expectRateLimitHeaders(res).limit).toBe(30);

    const usage = await usageOf(b, id);
    expect(usage.day).toMatchObject({ limit: 30, remaining: 0 });
    expect(usage.bannedUntil).not.toBeNull();
  });

  it('retrying after 429 bans the key on both instances; DELETE /admin/keys/{id}/ban on A lifts it everywhere', async () => {
    const { id, auth } = await createKey(
      a,
      { name: 'retrier', plan: 'enterprise', limits: { perMinute: 1000, perDay: 2 } },
      { overApi: true },
    );
    await awayFromDayEnd();
    const address = freshAddress();
    const codes: Array<number | string> = [];
    // Alternating instances, one after the other: 2 served, 11 refused (the 11th bans), then banned.
    for (let i = 0; i < 15; i++) {
      const res = await get(i % 2 === 0 ? a : b, auth, address);
      codes.push(res.status === 200 ? 200 : (res.body as { code: string }).code);
    }
    expect(codes).toEqual([
      200,
      200,
      ...Array<string>(11).fill('rate_limited'),
      'temporarily_banned',
      'temporarily_banned',
    ]);
    for (const product of [a, b]) {
      const res = await get(product, auth, address);
      expectError(res, 429, 'temporarily_banned');
      expect(Number(header(res, 'retry-after'))).toBeGreaterThan(800);
      expect(expectRateLimitHeaders(res).remaining).toBe(0);
    }
    expect((await usageOf(b, id)).bannedUntil).toMatch(/^\d{4}-\d\d-\d\dT/);

    await admin(a).delete(`/admin/keys/${id}/ban`).expect(204);
    expect((await usageOf(b, id)).bannedUntil).toBeNull();
    // Unbanned, the key is back to its windows: still over its day, so rate_limited, not banned.
    for (const product of [b, a]) expectError(await get(product, auth, address), 429, 'rate_limited');
  });

  it('a revocation on instance A reaches instance B’s cache within 1 s (key changes published across the cluster)', async () => {
    const { id, auth } = await createKey(a, { name: 'to revoke', plan: 'free' }, { overApi: true });
    const address = freshAddress();
    // Both instances resolve the key, so it sits in both caches (TTL 60 s) when A revokes it.
    for (const product of [a, b, b]) await get(product, auth, address).expect(200);

    await admin(a).delete(`/admin/keys/${id}`).expect(204);
    let last: request.Response | undefined;
    const took = await eventually(
      async () => {
        last = await get(b, auth, address);
        return last.status !== 200;
      },
      { timeoutMs: 1000 },
    );
    expect(took).toBeLessThan(1000);
    expectError(last!, 401, 'revoked_api_key');
    expectRateLimitHeaders(last!);
  });

  it('the per-address anonymous limit is one count across both instances: 10 of 20 concurrent pass to 401, 10 are 429', async () => {
    const address = freshAddress();
    const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => get(i % 2 === 0 ? a : b, null, address)));
    const missingKey = responses.filter((res) => res.status === 401);
    const limited = responses.filter((res) => res.status === 429);
    expect(missingKey).toHaveLength(10);
    expect(limited).toHaveLength(10);
    for (const res of missingKey) expectError(res, 401, 'missing_api_key');
    for (const res of limited) {
      expectError(res, 429, 'rate_limited');
      expect(expectRateLimitHeaders(res).policy).toBe('"anonymous";q=10;w=60');
      expect(Number(header(res, 'retry-after'))).toBeGreaterThanOrEqual(1);
    }
    // Another address has its own window on either instance.
    expectError(await get(b, null, freshAddress()), 401, 'missing_api_key');
  });

  it('spreads the counters of different keys over the masters (the slot routing is exercised)', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const { id, auth } = await createKey(
        i % 2 === 0 ? a : b,
        { name: `spread ${i}`, plan: 'free' },
        { overApi: true },
      );
      await get(i % 2 === 0 ? b : a, auth, freshAddress()).expect(200);
      ids.push(id);
    }
    const expected = new Set(ids.map((id) => keyLimiterRedisKey(namespace, id)));
    const perMaster = await Promise.all(masters.map((master) => namespaceKeysOn(master, `${namespace}:rl:{*`)));
    const holders = perMaster.map((keys) => keys.filter((key) => expected.has(key)));
    // Every counter is on exactly one master.
    expect(holders.flat().sort()).toEqual([...expected].sort());
    // 20 random key ids on one master: (1/3)^19. They spread.
    expect(holders.filter((keys) => keys.length > 0).length).toBeGreaterThanOrEqual(2);
    const slots = new Set(
      await Promise.all([...expected].map((key) => inspector.cluster('KEYSLOT', key) as Promise<number>)),
    );
    expect(slots.size).toBeGreaterThan(1);

    // The key store itself is one hash tag, so it lives whole on one master.
    const { byHash, byId } = redisKeyLayout(namespace);
    const storeKeys = await Promise.all(masters.map((master) => namespaceKeysOn(master, `${namespace}:keys:*`)));
    expect(storeKeys.filter((keys) => keys.length > 0)).toEqual([expect.arrayContaining([byHash, byId])]);
  });

  it('GET /admin/deprecations counts the calls of a deprecated operation made on both instances', async () => {
    const { id, auth } = await createKey(a, { name: 'old client', plan: 'free' }, { overApi: true });
    const address = freshAddress();
    const created = await request(a.gatewayUrl)
      .post('/v1/pets')
      .set('Authorization', auth)
      .set('X-Forwarded-For', address)
      .send({ name: 'Rex', categoryId: 1 })
      .expect(201);
    const petId = (created.body as { id: number }).id;
    for (const product of [a, b, b]) {
      const res = await request(product.gatewayUrl)
        .get(`/v1/pets/${petId}`)
        .set('Authorization', auth)
        .set('X-Forwarded-For', address)
        .expect(200);
      expect(header(res, 'deprecation')).toMatch(/^@\d+$/);
    }
    // Each instance flushes its own calls when asked; B first, then A reads both.
    await admin(b).get('/admin/deprecations').expect(200);
    const report = await admin(a).get('/admin/deprecations').expect(200);
    const routes = (
      report.body as {
        routes: Array<{
          method: string;
          route: string;
          callers: Array<{ keyId: string; count: number; name: string }>;
        }>;
      }
    ).routes;
    const getPet = routes.find((r) => r.method === 'GET' && r.route === '/v1/pets/{petId}');
    expect(getPet?.callers).toEqual([expect.objectContaining({ keyId: id, count: 3, name: 'old client' })]);
  });

  it('the deprecated-callers store counts across instances on the cluster, for routes on different slots', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 1, 12));
    const store = new RedisDeprecationUsageStore(inspector, namespace);
    const [usageA, usageB] = [
      new UsageRecorder({ flushIntervalMs: 60_000 }),
      new UsageRecorder({ flushIntervalMs: 60_000 }),
    ];
    const recorderA = new DeprecationUsage(usageA, store, clock);
    const recorderB = new DeprecationUsage(usageB, store, clock);
    const routes = ['GET /pets/{petId}', 'DELETE /pets/{petId}', 'PUT /pets/{petId}/photo'];
    for (const route of routes) {
      recorderA.record(route, 'key_a');
      recorderB.record(route, 'key_a');
      recorderB.record(route, 'key_b');
    }
    await Promise.all([recorderA.flush(), recorderB.flush()]);
    clock.advance(86_400_000);
    for (const route of routes) recorderA.record(route, 'key_b');
    await recorderA.flush();
    for (const route of routes) {
      expect(await recorderB.callers(route)).toEqual([
        { keyId: 'key_b', count: 2, lastCallAt: clock.now() },
        { keyId: 'key_a', count: 2, lastCallAt: clock.now() - 86_400_000 },
      ]);
    }
    await usageA.close();
    await usageB.close();
  });
});
