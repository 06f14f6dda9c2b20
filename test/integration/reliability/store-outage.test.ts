import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startRedisServer, type RedisProcess } from '../../support/redis-server';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { uniqueNamespace } from '../../support/test-redis';
import { eventually } from '../../support/eventually';
import { logLines } from '../../support/log-lines';
import { ManualClock } from '../../../src/shared/clock';

// Redis really stops here: a private redis-server is killed (dead store), or frozen with SIGSTOP
// (a store that accepts connections and never answers), then brought back. Each fail mode of
// config store.failMode is checked against what it promises.

/** A private Redis with an append-only file, so a restart on the same port and dir keeps the keys. */
async function startDurableRedis(dir: string, port?: number): Promise<RedisProcess> {
  return startRedisServer(['--appendonly', 'yes', '--appendfsync', 'always', '--dir', dir], port);
}

interface Answer {
  status: number;
  code?: string;
  headers: Headers;
  ms: number;
}

async function call(
  product: ProductHarness,
  key: string | null,
  pathname = '/v1/pets',
  requestId?: string,
): Promise<Answer> {
  const started = Date.now();
  const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};
  if (requestId) headers['x-request-id'] = requestId;
  const res = await fetch(product.gatewayUrl + pathname, { headers });
  const body = (await res.json()) as { code?: string };
  return {
    status: res.status,
    code: Array.isArray(body) ? undefined : body.code,
    headers: res.headers,
    ms: Date.now() - started,
  };
}

async function metricValue(product: ProductHarness, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(product.adminUrl + '/metrics')).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}${labels} `) || (labels === '' && l.startsWith(`${name} `)));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** durationMs of each request's log line (the gateway's own timing, arrival to answer), once all are written. */
async function gatewayDurations(product: ProductHarness, requestIds: readonly string[]): Promise<number[]> {
  const wanted = new Set(requestIds);
  const found = () =>
    logLines(product)
      // The gateway's lines: the embedded inventory logs the same request id under its component.
      .filter((entry) => entry.msg === 'request' && entry.component === undefined && wanted.has(entry.requestId!));
  await eventually(() => found().length === requestIds.length, { what: 'every request is logged' });
  return found().map((entry) => entry.durationMs!);
}

function freeze(redis: RedisProcess): void {
  process.kill(redis.pid, 'SIGSTOP');
}
function thaw(redis: RedisProcess): void {
  process.kill(redis.pid, 'SIGCONT');
}

let redisDir: string;
let redis: RedisProcess | null;
let product: ProductHarness;
let running: ProductHarness | null = null;

type KeySpec = { name: string; plan: string; limits?: { perMinute: number; perDay: number } };

/**
 * Creates the keys with one product, then starts the product under test on the same store: a key
 * created by the product under test would announce itself on pub/sub, and that announcement can
 * arrive after the first request cached the key and evict it again, just before the outage.
 */
async function startWith(failMode: 'local' | 'open' | 'closed', specs: KeySpec[]): Promise<string[]> {
  redisDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-outage-redis-'));
  redis = await startDurableRedis(redisDir);
  const options = {
    redis: false,
    // The counts are compared before, during and after an outage of several seconds: a clock held
    // 5 s into the current minute keeps them in one minute window (a real one rolled over mid-test).
    clock: new ManualClock(Math.floor(Date.now() / 60_000) * 60_000 + 5_000),
    env: { REDIS_URL: redis.url },
    namespace: uniqueNamespace(`outage-${failMode}`),
    overrides: { store: { failMode }, redis: { commandTimeoutMs: 200 } },
  };
  // The creator only writes the keys: a Redis that answers is its premise (5 s, not the 200 ms under test).
  const creator = await startTestProduct({
    ...options,
    overrides: { ...options.overrides, redis: { commandTimeoutMs: 5000 } },
  });
  const keys: string[] = [];
  try {
    for (const spec of specs) keys.push((await creator.keyService.create(spec)).key);
  } finally {
    await creator.close();
  }
  product = running = await startTestProduct(options);
  return keys;
}

afterEach(async () => {
  if (redis) {
    thaw(redis);
    await redis.stop();
    redis = null;
  }
  await running?.close();
  running = null;
});

describe('store.failMode local (the default)', () => {
  test('a dead Redis: cached keys are limited per instance, an uncached key gets 503, and the gateway returns to Redis by itself', async () => {
    const [cached, uncached] = await startWith('local', [
      { name: 'cached', plan: 'enterprise', limits: { perMinute: 3, perDay: 1000 } },
      { name: 'uncached', plan: 'free' },
    ]);
    expect((await call(product, cached!)).status).toBe(200);
    expect(await metricValue(product, 'gateway_store_degraded')).toBe(0);

    await redis!.stop();
    const port = redis!.port;
    redis = null;

    // The in-process fallback starts where Redis left off (1 of 3 used): 2 more admitted, then 429.
    const during = [];
    for (let i = 0; i < 4; i++) during.push(await call(product, cached!));
    expect(during.map((a) => a.status)).toEqual([200, 200, 429, 429]);
    expect(during[2]!.code).toBe('rate_limited');
    for (const answer of during) {
      expect(answer.headers.get('x-ratelimit-limit')).toBe('3');
      expect(answer.ms).toBeLessThan(2000);
    }
    expect(during.map((a) => a.headers.get('x-ratelimit-remaining'))).toEqual(['1', '0', '0', '0']);
    expect(await metricValue(product, 'gateway_store_degraded')).toBe(1);
    expect(await metricValue(product, 'gateway_store_errors_total')).toBeGreaterThan(0);
    expect(product.logs.text()).toContain('"storeFallback":"local"');

    // Never a wrong 401 for a real key the gateway cannot look up now.
    const unknownNow = await call(product, uncached!);
    expect(unknownNow).toMatchObject({ status: 503, code: 'service_unavailable' });
    expect(unknownNow.headers.get('retry-after')).toBe('1');
    // Without a key: the per-address limit falls back too, and the answer is still 401.
    const anonymous = await call(product, null);
    expect(anonymous).toMatchObject({ status: 401, code: 'missing_api_key' });
    expect(anonymous.headers.get('x-ratelimit-limit')).toBe('30');
    // The admin API's reads of the store: 503 with the Error body and Retry-After, never 500 (CONTRACT §3).
    const audit = await fetch(`${product.adminUrl}/admin/audit`, {
      headers: { authorization: `Bearer ${product.adminToken}` },
    });
    expect([audit.status, await audit.json(), audit.headers.get('retry-after')]).toEqual([
      503,
      {
        code: 'service_unavailable',
        message: 'The gateway cannot reach its store right now. Retry shortly.',
        status: 503,
      },
      '1',
    ]);
    expect(product.logs.text()).toContain('admin request refused: the store is unreachable');

    redis = await startDurableRedis(redisDir, port);
    await eventually(async () => (await metricValue(product, 'gateway_store_degraded')) === 0);
    await eventually(async () => (await fetch(product.adminUrl + '/readyz')).status === 200);
    // Back on Redis: the counts are the shared ones again (1 used before the outage).
    const after = await call(product, cached!);
    expect(after.status).toBe(200);
    expect(after.headers.get('x-ratelimit-remaining')).toBe('1');
    expect((await call(product, uncached!)).status).toBe(200);
    expect(
      (await fetch(`${product.adminUrl}/admin/audit`, { headers: { authorization: `Bearer ${product.adminToken}` } }))
        .status,
    ).toBe(200);
  });

  test('a frozen Redis: each decision falls back within the command timeout, not a minute of retries', async () => {
    const [key] = await startWith('local', [{ name: 'frozen', plan: 'pro' }]);
    expect((await call(product, key!)).status).toBe(200);
    freeze(redis!);
    const first = await call(product, key!, '/v1/pets', 'frozen-first');
    expect(first.status).toBe(200);
    // commandTimeoutMs is 200: the one request that meets the frozen store waits that long, no more.
    // Timed by the gateway (its request log): the client's figure also holds a crowded machine's
    // accept queue (1,582 ms at load 20-27); a minute of retries would still show on either.
    expect(Math.max(...(await gatewayDurations(product, ['frozen-first'])))).toBeLessThan(1500);
    // After that the gateway does not ask the frozen store again until a probe gets an answer.
    const nextIds = Array.from({ length: 10 }, (_, i) => `frozen-next-${i}`);
    const next = await Promise.all(nextIds.map((id) => call(product, key!, '/v1/pets', id)));
    expect(next.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect(Math.max(...(await gatewayDurations(product, nextIds)))).toBeLessThan(1500);
    expect(await metricValue(product, 'gateway_store_degraded')).toBe(1);

    thaw(redis!);
    await eventually(async () => (await metricValue(product, 'gateway_store_degraded')) === 0);
    expect((await call(product, key!)).status).toBe(200);
    expect(product.logs.text()).toContain('store answers again');
  });
});

describe('store.failMode open', () => {
  test('serves every request of a cached key without limits while Redis is down, and counts them', async () => {
    const [key] = await startWith('open', [
      { name: 'open', plan: 'enterprise', limits: { perMinute: 2, perDay: 1000 } },
    ]);
    expect((await call(product, key!)).status).toBe(200);
    await redis!.stop();
    redis = null;
    const during = [];
    for (let i = 0; i < 6; i++) during.push(await call(product, key!));
    expect(during.map((a) => a.status)).toEqual(Array(6).fill(200));
    // Headers still say what this instance counted: nothing is left, though nothing is refused.
    expect(during.at(-1)!.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(await metricValue(product, 'gateway_ratelimit_unenforced_total', '{plan="enterprise"}')).toBe(6);
    expect(await metricValue(product, 'gateway_store_degraded')).toBe(1);
    // Without a key the answer is still 401, never a pass.
    expect(await call(product, null)).toMatchObject({ status: 401, code: 'missing_api_key' });
  });
});

describe('store.failMode closed', () => {
  test('answers 503 service_unavailable while Redis is down, even for a cached key, and serves again once it is back', async () => {
    const [key] = await startWith('closed', [{ name: 'closed', plan: 'pro' }]);
    expect((await call(product, key!)).status).toBe(200);
    await redis!.stop();
    const port = redis!.port;
    redis = null;
    const during = await call(product, key!);
    expect(during).toMatchObject({ status: 503, code: 'service_unavailable' });
    expect(during.headers.get('retry-after')).toBe('1');
    expect(during.ms).toBeLessThan(2000);
    expect(await call(product, null)).toMatchObject({ status: 503, code: 'service_unavailable' });
    // No fallback in this mode: the gauge stays 0 and no request was served unlimited.
    expect(await metricValue(product, 'gateway_store_degraded')).toBe(0);
    expect(await metricValue(product, 'gateway_ratelimit_unenforced_total', '{plan="pro"}')).toBe(0);

    redis = await startDurableRedis(redisDir, port);
    await eventually(async () => (await call(product, key!)).status === 200);
  });
});
