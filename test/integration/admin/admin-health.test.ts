import request from 'supertest';
import { freePort, startRedisServer, type RedisProcess } from '../../support/redis-server';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { uniqueNamespace } from '../../support/test-redis';
import { gatewayGet } from './admin-kit';
import { eventually } from '../../support/eventually';
import { createKey } from '../../support/keys';

/** /healthz, /readyz and /metrics on the admin listener: no token needed, and /readyz names what failed. */

describe('with the store and the upstream answering', () => {
  let product: ProductHarness;

  beforeAll(async () => {
    product = await startTestProduct();
  });

  afterAll(async () => {
    await product.close();
  });

  test('GET /healthz: 200 {"status":"ok"} without a token', async () => {
    const res = await request(product.adminUrl).get('/healthz');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ status: 'ok' });
  });

  test('GET /readyz: 200 naming every check as ok (with Redis, the durable copies under DATA_DIR too)', async () => {
    const res = await request(product.adminUrl).get('/readyz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      status: 'ready',
      checks: {
        store: 'ok',
        'key copy database': 'ok',
        'consumer copy database': 'ok',
        'inventory database': 'ok',
        upstream: 'ok',
      },
      upstreamCircuit: 'closed',
    });
  });

  test('GET /metrics: Prometheus text without a token, counting gateway requests by route template and plan', async () => {
    const created = await createKey(product, { name: 'measured', plan: 'pro' }, { overApi: true });
    await gatewayGet(product, created.key).expect(200);
    await gatewayGet(product, created.key, '/v1/pets/123456789').expect(404);

    const res = await request(product.adminUrl).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.text).toContain('# TYPE gateway_http_requests_total counter');
    expect(res.text).toMatch(
      /^gateway_http_requests_total\{method="GET",route="\/v1\/pets",status_code="200",plan="pro"\} 1$/m,
    );
    expect(res.text).toMatch(
      /^gateway_http_requests_total\{method="GET",route="\/v1\/pets\/\{petId\}",status_code="404",plan="pro"\} 1$/m,
    );
    expect(res.text).not.toContain('123456789');
    expect(res.text).not.toContain(created.id);
    expect(res.text).not.toContain(created.key);
    // Default process metrics are there too.
    expect(res.text).toContain('process_cpu_user_seconds_total');
  });

  test('a token sent to the open routes is ignored, not required', async () => {
    const res = await request(product.adminUrl).get('/healthz').set('Authorization', 'Bearer whatever');
    expect(res.status).toBe(200);
  });
});

describe('GET /readyz when a shared dependency is down (CONTRACT §5: shown with 200, never a 503)', () => {
  test('200 degraded naming upstream when the upstream does not answer', async () => {
    const closedPort = await freePort();
    const product = await startTestProduct({ overrides: { upstream: { url: `http://127.0.0.1:${closedPort}` } } });
    try {
      const res = await request(product.adminUrl).get('/readyz');
      expectDegraded(res, ['upstream']);
      // Liveness is not readiness: the process still runs.
      await request(product.adminUrl).get('/healthz').expect(200);
    } finally {
      await product.close();
    }
  });

  test('200 degraded naming store when Redis stops answering, and ready again once it is back', async () => {
    let redis: RedisProcess | null = await startRedisServer();
    const port = redis.port;
    const product = await startTestProduct({
      redis: false,
      env: { REDIS_URL: redis.url },
      namespace: uniqueNamespace('readyz'),
    });
    try {
      await request(product.adminUrl).get('/readyz').expect(200);
      await redis.stop();
      redis = null;
      expectDegraded(await request(product.adminUrl).get('/readyz'), ['store']);
      await request(product.adminUrl).get('/healthz').expect(200);

      redis = await startRedisServer([], port);
      await eventually(async () => (await request(product.adminUrl).get('/readyz')).body.status === 'ready');
    } finally {
      await product.close();
      await redis?.stop();
    }
  });
});

/** 200 with `degraded` naming the shared checks that did not answer, each `not answering` in `checks`. */
function expectDegraded(res: request.Response, degraded: string[]): void {
  expect({ status: res.status, body: res.body as unknown }).toEqual({
    status: 200,
    body: {
      status: 'degraded',
      degraded,
      checks: expect.objectContaining(Object.fromEntries(degraded.map((name) => [name, `${name} not answering`]))),
      upstreamCircuit: 'closed',
    },
  });
  expect(res.headers['content-type']).toMatch(/^application\/json/);
}
