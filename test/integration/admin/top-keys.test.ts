import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { uniqueNamespace } from '../../support/test-redis';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { adminRequest } from './admin-kit';
import { eventually } from '../../support/eventually';
import { expectError } from '../../support/errors';

/**
 * Issue 40, GET /admin/stats/top-keys: the keys with the most requests over the last 5 or 60
 * minutes across every instance (per-minute buckets each instance writes with its batched flush),
 * most first; and the same in process.
 */

jest.setTimeout(60_000);

interface TopKeys {
  keys: Array<{ keyId: string; name: string | null; consumerId: string | null; requests: number; rateLimited: number }>;
}

async function call(product: ProductHarness, key: string): Promise<number> {
  const res = await fetch(`${product.gatewayUrl}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

async function topKeys(product: ProductHarness, query = ''): Promise<TopKeys['keys']> {
  return ((await adminRequest(product, 'get', `/admin/stats/top-keys${query}`).expect(200)).body as TopKeys).keys;
}

describe('on Redis, two instances', () => {
  let a: ProductHarness;
  let b: ProductHarness;

  beforeAll(async () => {
    const namespace = uniqueNamespace('top-keys');
    a = await startTestProduct({ namespace });
    b = await startTestProduct({ namespace, overrides: { upstream: { url: a.inventory!.url } } });
  });

  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  test('the busiest key first, its requests counted on both instances, its refusals beside them', async () => {
    const busy = await a.keyService.create({ name: 'busy', plan: 'free' });
    const quiet = await a.keyService.create({ name: 'quiet', plan: 'free' });
    const limited = await a.keyService.create({ name: 'limited', plan: 'free', limits: { perMinute: 2, perDay: 100 } });
    for (let i = 0; i < 6; i++) expect(await call(i % 2 === 0 ? a : b, busy.key)).toBe(200);
    expect(await call(b, quiet.key)).toBe(200);
    const limitedStatuses = [];
    for (let i = 0; i < 4; i++) limitedStatuses.push(await call(i % 2 === 0 ? b : a, limited.key));
    expect(limitedStatuses).toEqual([200, 200, 429, 429]);

    // A flushes its own counts when asked; B's arrive with its next flush (every 5 s).
    let keys: TopKeys['keys'] = [];
    await eventually(
      async () => {
        keys = await topKeys(a, '?minutes=5');
        return keys[0]?.requests === 6 && keys.some((k) => k.keyId === quiet.record.id);
      },
      { timeoutMs: 20_000 },
    );
    expect(keys).toEqual([
      { keyId: busy.record.id, name: 'busy', consumerId: null, requests: 6, rateLimited: 0 },
      { keyId: limited.record.id, name: 'limited', consumerId: null, requests: 4, rateLimited: 2 },
      { keyId: quiet.record.id, name: 'quiet', consumerId: null, requests: 1, rateLimited: 0 },
    ]);
    // The hour holds the same minutes; limit cuts the list.
    expect(await topKeys(b, '?minutes=60&limit=1')).toEqual([keys[0]]);
    // Default: the last 5 minutes, 20 keys.
    expect(await topKeys(b)).toEqual(keys);
  });

  test.each([
    ['minutes=7', '?minutes=7', 'minutes must be 5 or 60.'],
    ['minutes=abc', '?minutes=abc', 'minutes must be 5 or 60.'],
    ['limit=0', '?limit=0', 'limit must be an integer from 1 to 100.'],
    ['limit=101', '?limit=101', 'limit must be an integer from 1 to 100.'],
    ['limit=1.5', '?limit=1.5', 'limit must be an integer from 1 to 100.'],
  ])('%s: 400 invalid_parameter with the Error body', async (_name, query, message) => {
    const res = await adminRequest(a, 'get', `/admin/stats/top-keys${query}`);
    expectError(res, 400, 'invalid_parameter');
    expect((res.body as { message: string }).message).toBe(message);
  });
});

test('in process: the same from memory', async () => {
  const product = await startTestProduct({ redis: false });
  try {
    const first = await product.keyService.create({ name: 'first', plan: 'free' });
    const second = await product.keyService.create({ name: 'second', plan: 'free' });
    expect(await call(product, second.key)).toBe(200);
    for (let i = 0; i < 3; i++) expect(await call(product, first.key)).toBe(200);
    expect(await topKeys(product, '?minutes=60')).toEqual([
      { keyId: first.record.id, name: 'first', consumerId: null, requests: 3, rateLimited: 0 },
      { keyId: second.record.id, name: 'second', consumerId: null, requests: 1, rateLimited: 0 },
    ]);
  } finally {
    await product.close();
  }
});

/** An upstream that holds each request until `release()`; what it holds is counted. */
async function startHoldingUpstream(): Promise<{
  url: string;
  held(): number;
  release(): void;
  close(): Promise<void>;
}> {
  const waiting: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    waiting.push(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const release = () => {
    for (const res of waiting.splice(0)) res.writeHead(200, { 'content-type': 'application/json' }).end('[]');
  };
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held: () => waiting.length,
    release,
    close: () => {
      release();
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// Issue 48 item 14: a 429 concurrency_limited is a rate-limited request in the top keys, the usage
// history and the usage export alike, as a 429 rate_limited is.
describe.each([
  ['on Redis', true],
  ['in process', false],
])('%s: a request refused with 429 concurrency_limited', (_name, redis) => {
  let upstream: Awaited<ReturnType<typeof startHoldingUpstream>>;
  let product: ProductHarness;

  beforeAll(async () => {
    upstream = await startHoldingUpstream();
    product = await startTestProduct({ redis, overrides: { upstream: { url: upstream.url } } });
  });

  afterAll(async () => {
    await product?.close();
    await upstream?.close();
  });

  test('counts as rateLimited in the top keys, the usage history and the usage export', async () => {
    const gated = await product.keyService.create({
      name: 'gated',
      plan: 'free',
      limits: { perMinute: 100, perDay: 1000, maxInFlight: 1 },
    });
    const first = call(product, gated.key);
    await eventually(() => upstream.held() === 1, { what: 'the first request held at the upstream' });
    const refused = await fetch(`${product.gatewayUrl}/v1/pets?limit=1`, {
      headers: { authorization: `Bearer ${gated.key}` },
    });
    expect({ status: refused.status, code: ((await refused.json()) as { code: string }).code }).toEqual({
      status: 429,
      code: 'concurrency_limited',
    });
    upstream.release();
    expect(await first).toBe(200);

    let keys: TopKeys['keys'] = [];
    await eventually(
      async () => {
        keys = await topKeys(product, '?minutes=5');
        return keys[0]?.requests === 2;
      },
      { timeoutMs: 20_000, what: () => `both requests in the top keys: ${JSON.stringify(keys)}` },
    );
    expect(keys).toEqual([{ keyId: gated.record.id, name: 'gated', consumerId: null, requests: 2, rateLimited: 1 }]);

    const today = new Date().toISOString().slice(0, 10);
    let usage: Array<{ date: string; admitted: number; rateLimited: number; banned: number }> = [];
    await eventually(
      async () => {
        usage = (
          (await adminRequest(product, 'get', `/admin/keys/${gated.record.id}/usage?days=1`).expect(200)).body as {
            days: typeof usage;
          }
        ).days;
        return usage[0]?.admitted === 1 && usage[0].rateLimited === 1;
      },
      { timeoutMs: 20_000, what: () => `the refusal in the usage history: ${JSON.stringify(usage)}` },
    );
    expect(usage).toEqual([{ date: today, admitted: 1, rateLimited: 1, banned: 0 }]);
    const exported = await adminRequest(product, 'get', `/admin/usage/export?from=${today}&to=${today}`).expect(200);
    const lines = exported.text
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { keyId: string; rateLimited: number; admitted: number });
    expect(lines.filter((l) => l.keyId === gated.record.id)).toEqual([
      expect.objectContaining({ admitted: 1, rateLimited: 1, banned: 0 }),
    ]);
  });
});
