import path from 'node:path';
import request from 'supertest';
import { Registry } from 'prom-client';
import { createInventoryApp } from '../../../src/inventory/app';
import { openInventoryDatabase } from '../../../src/inventory/database';
import { createInventoryMetrics, sqliteStatements } from '../../../src/inventory/metrics';
import { SqlitePetRepository } from '../../../src/inventory/pet-repository';
import { UNMATCHED_ROUTE } from '../../../src/shared/public-api';
import { systemClock } from '../../../src/shared/clock';
import { createLogger } from '../../../src/shared/logger';
import { UPSTREAM_TOKEN_HEADER, UpstreamTokenVerifier } from '../../../src/shared/http/upstream-token';
import {
  makeTempDir,
  rawRequest,
  spawnInventoryProcess,
  startTestInventory,
  stopInventoryProcess,
  testConfig,
  tokenSigner,
  type TestInventory,
} from '../../support/inventory-harness';
import { LogCapture, startTestProduct, type ProductHarness } from '../../support/product-harness';
import { eventuallyLogLine, logLines } from '../../support/log-lines';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition (comments skipped). */
function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[pair[1]!] = pair[2]!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** `{ "GET /v1/pets 200": 2, … }` for one metric keyed by method, route and status. */
function byRequest(samples: Sample[], name: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const s of samples.filter((sample) => sample.name === name)) {
    counts[`${s.labels.method} ${s.labels.route} ${s.labels.status_code}`] = s.value;
  }
  return counts;
}

const TEMPLATES = ['/v1/pets', '/v1/pets/{petId}', '/healthz', '/readyz', '/metrics', UNMATCHED_ROUTE];

describe('inventory observability: metrics and one log line per request', () => {
  const logs = new LogCapture();
  let inventory: TestInventory;
  let token: string;
  let samples: Sample[];
  let metricsText: string;
  const forgedToken = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmb3JnZWQifQ.' + 'A'.repeat(43);
  const presentedKey = 'asg_dev_' + 'K'.repeat(32);
  /** What each scripted request sent as X-Request-Id, and the line it must produce. */
  const expected: Array<{ requestId: string; method: string; route: string; status: number; keyId: string | null }> =
    [];

  beforeAll(async () => {
    // debug, so the probes' request lines are written too and their level can be checked.
    inventory = await startTestInventory({ logger: createLogger('debug', logs) });
    token = await inventory.token();
    const send = async (
      requestId: string,
      run: () => Promise<request.Response>,
      line: { method: string; route: string; status: number; keyId: string | null },
    ) => {
      const res = await run();
      expect({ requestId, status: res.status }).toEqual({ requestId, status: line.status });
      expect(res.headers['x-request-id']).toBe(requestId);
      expected.push({ requestId, ...line });
      return res;
    };
    const withId = (requestId: string) => ({ 'X-Request-Id': requestId });
    const url = inventory.url;

    await send('obs-list', () => inventory.get('/v1/pets', withId('obs-list')), {
      method: 'GET',
      route: '/v1/pets',
      status: 200,
      keyId: 'test-key',
    });
    await send('obs-list-sold', () => inventory.get('/v1/pets?status=sold&limit=5', withId('obs-list-sold')), {
      method: 'GET',
      route: '/v1/pets',
      status: 200,
      keyId: 'test-key',
    });
    const created = await send(
      'obs-create',
      () => inventory.post('/v1/pets', { name: 'Rex', categoryId: 1 }, withId('obs-create')),
      {
        method: 'POST',
        route: '/v1/pets',
        status: 201,
        keyId: 'test-key',
      },
    );
    const petId = (created.body as { id: number }).id;
    await send('obs-get', () => inventory.get(`/v1/pets/${petId}`, withId('obs-get')), {
      method: 'GET',
      route: '/v1/pets/{petId}',
      status: 200,
      keyId: 'test-key',
    });
    await send('obs-get-404', () => inventory.get('/v1/pets/987654', withId('obs-get-404')), {
      method: 'GET',
      route: '/v1/pets/{petId}',
      status: 404,
      keyId: 'test-key',
    });
    await send('obs-get-400', () => inventory.get('/v1/pets/abc', withId('obs-get-400')), {
      method: 'GET',
      route: '/v1/pets/{petId}',
      status: 400,
      keyId: 'test-key',
    });
    // A caller without a token, one with a forged token, both also sending a key and a cookie the
    // gateway would have stripped: none of it may reach a log line.
    await send(
      'obs-no-token',
      () =>
        request(url)
          .get('/v1/pets')
          .set(withId('obs-no-token'))
          .set('Authorization', `Bearer ${presentedKey}`)
          .set('Cookie', 'session=cookie-secret-value'),
      { method: 'GET', route: '/v1/pets', status: 401, keyId: null },
    );
    await send(
      'obs-forged',
      () =>
        request(url)
          .get('/v1/pets/1')
          .set(withId('obs-forged'))
          .set(UPSTREAM_TOKEN_HEADER, forgedToken)
          .set('Authorization', `Bearer ${presentedKey}`),
      { method: 'GET', route: '/v1/pets/{petId}', status: 401, keyId: null },
    );
    await send(
      'obs-bad-body',
      () => inventory.post('/v1/pets', { name: '', categoryId: 0, id: 3 }, withId('obs-bad-body')),
      {
        method: 'POST',
        route: '/v1/pets',
        status: 400,
        keyId: 'test-key',
      },
    );
    await send(
      'obs-405',
      () => request(url).delete('/v1/pets').set(withId('obs-405')).set(UPSTREAM_TOKEN_HEADER, token),
      {
        method: 'DELETE',
        route: '/v1/pets',
        status: 405,
        keyId: 'test-key',
      },
    );
    await send('obs-unmatched', () => inventory.get('/v1/owners/4242', withId('obs-unmatched')), {
      method: 'GET',
      route: UNMATCHED_ROUTE,
      status: 404,
      keyId: 'test-key',
    });
    await send('obs-trailing-slash', () => inventory.get('/v1/pets/', withId('obs-trailing-slash')), {
      method: 'GET',
      route: UNMATCHED_ROUTE,
      status: 404,
      keyId: 'test-key',
    });
    await send('obs-healthz', () => request(url).get('/healthz').set(withId('obs-healthz')), {
      method: 'GET',
      route: '/healthz',
      status: 200,
      keyId: null,
    });
    await send('obs-readyz', () => request(url).get('/readyz').set(withId('obs-readyz')), {
      method: 'GET',
      route: '/readyz',
      status: 200,
      keyId: null,
    });

    const scrape = await request(url).get('/metrics').set(withId('obs-metrics'));
    expect(scrape.status).toBe(200);
    expect(scrape.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expected.push({ requestId: 'obs-metrics', method: 'GET', route: '/metrics', status: 200, keyId: null });
    metricsText = scrape.text;
    samples = parseMetrics(metricsText);
  });

  afterAll(async () => {
    await inventory?.close();
  });

  it('counts every request once, by method, route template and status, and nothing else', () => {
    // The scrape itself is counted once its response has ended, so it is not in its own body.
    const want = {
      'GET /v1/pets 200': 2,
      'GET /v1/pets 401': 1,
      'POST /v1/pets 201': 1,
      'POST /v1/pets 400': 1,
      'DELETE /v1/pets 405': 1,
      'GET /v1/pets/{petId} 200': 1,
      'GET /v1/pets/{petId} 404': 1,
      'GET /v1/pets/{petId} 400': 1,
      'GET /v1/pets/{petId} 401': 1,
      [`GET ${UNMATCHED_ROUTE} 404`]: 2,
      'GET /healthz 200': 1,
      'GET /readyz 200': 1,
    };
    expect(byRequest(samples, 'inventory_http_requests_total')).toEqual(want);
    expect(byRequest(samples, 'inventory_http_request_duration_seconds_count')).toEqual(want);
  });

  it('times each prepared statement under its fixed name', () => {
    const counts = Object.fromEntries(
      samples
        .filter((s) => s.name === 'inventory_sqlite_query_duration_seconds_count')
        .map((s) => [s.labels.statement, s.value]),
    );
    // The 404 looked; the 400s, the 401s and the 405 never reached the database.
    expect(counts).toEqual({ insert_pet: 1, get_pet: 2, list_pets: 1, list_pets_by_status: 1, ping: 1 });
    expect(Object.keys(counts).sort()).toEqual([...sqliteStatements].sort());
    // Sub-millisecond statements land in the microsecond buckets, not all in the first one.
    const smallest = samples.find(
      (s) => s.name === 'inventory_sqlite_query_duration_seconds_bucket' && s.labels.le === '0.00001',
    );
    expect(smallest).toBeDefined();
    const sums = samples.filter(
      (s) => s.name === 'inventory_sqlite_query_duration_seconds_sum' && counts[s.labels.statement!]! > 0,
    );
    expect(sums.every((s) => s.value > 0)).toBe(true);
  });

  it('no label holds a raw path, a query, a key id, a key or a token', () => {
    const routes = new Set(samples.filter((s) => s.labels.route !== undefined).map((s) => s.labels.route));
    expect([...routes].every((route) => TEMPLATES.includes(route!))).toBe(true);
    // Names and labels only: a sample's value (a duration sum such as 0.004242) may hold any digits.
    const withoutValues = metricsText
      .split('\n')
      .map((line) => (line.startsWith('#') || !line.includes(' ') ? line : line.slice(0, line.lastIndexOf(' '))))
      .join('\n');
    expect(withoutValues).not.toMatch(/987654|owners|4242|\/abc|status=|limit=/);
    expect(metricsText).not.toContain('test-key');
    expect(metricsText).not.toContain(token);
    expect(metricsText).not.toContain(presentedKey);
    expect(metricsText).not.toContain('SELECT');
  });

  it('leaves out the default process metrics when not asked for them (embedded)', () => {
    expect(samples.some((s) => s.name.startsWith('process_') || s.name.startsWith('nodejs_'))).toBe(false);
  });

  it('writes one compact request line per request, with the caller-sent request id', () => {
    const lines = logLines(logs).filter((line) => line.msg === 'request');
    for (const want of expected) {
      const mine = lines.filter((line) => line.requestId === want.requestId);
      expect({ requestId: want.requestId, lines: mine.length }).toEqual({ requestId: want.requestId, lines: 1 });
      const line = mine[0]!;
      expect(line).toMatchObject({ method: want.method, route: want.route, status: want.status, keyId: want.keyId });
      expect(typeof line.durationMs).toBe('number');
      expect(line.durationMs as number).toBeGreaterThanOrEqual(0);
      // Only these fields: no req, res, headers or url.
      expect(Object.keys(line).sort()).toEqual([
        'durationMs',
        'keyId',
        'level',
        'method',
        'msg',
        'requestId',
        'route',
        'service',
        'status',
        'time',
      ]);
    }
    expect(lines).toHaveLength(expected.length);
  });

  it('logs the probes at debug and the API at info', () => {
    const levelOf = (requestId: string) =>
      logLines(logs).find((line) => line.msg === 'request' && line.requestId === requestId)?.level;
    expect(levelOf('obs-healthz')).toBe(20);
    expect(levelOf('obs-readyz')).toBe(20);
    expect(levelOf('obs-metrics')).toBe(20);
    expect(levelOf('obs-list')).toBe(30);
    expect(levelOf('obs-no-token')).toBe(30);
  });

  it('never logs a token, a key, a cookie or an Authorization value', () => {
    const text = logs.text();
    expect(text).not.toContain(token);
    expect(text).not.toContain(forgedToken);
    expect(text).not.toContain(presentedKey);
    expect(text).not.toContain('K'.repeat(16));
    expect(text).not.toContain('cookie-secret-value');
    expect(text).not.toMatch(/bearer/i);
    expect(text).not.toMatch(/authorization|x-gateway-token|"headers"/i);
  });

  it('a request id that is not sane is replaced, and the line carries the id the response did', async () => {
    const res = await inventory.get('/v1/pets?limit=1', { 'X-Request-Id': 'has space; and more' });
    const sent = res.headers['x-request-id'] as string;
    expect(sent).toMatch(/^[0-9a-f-]{36}$/);
    const line = await eventuallyLogLine(logs, { msg: 'request', requestId: sent });
    expect(line).toMatchObject({ requestId: sent, route: '/v1/pets', status: 200 });
    expect(logs.text()).not.toContain('has space');
  });

  it('GET /metrics needs no token; other methods get 405', async () => {
    expect((await request(inventory.url).get('/metrics')).status).toBe(200);
    const post = await request(inventory.url).post('/metrics');
    expect(post.status).toBe(405);
    expect(post.body).toEqual({ code: 'method_not_allowed', message: expect.any(String), status: 405 });
    expect(post.headers.allow).toBe('GET, HEAD');
  });
});

describe('inventory /readyz and metrics when the database fails', () => {
  it('answers 503 naming the database, counted under /readyz, with the failed ping timed', async () => {
    const dir = makeTempDir('inventory-obs-broken');
    const config = testConfig(dir);
    const metrics = createInventoryMetrics(new Registry());
    const repository = new SqlitePetRepository(
      openInventoryDatabase(path.join(dir, 'inventory.sqlite')),
      systemClock,
      metrics,
    );
    repository.close();
    const verifier = new UpstreamTokenVerifier({ ...config.signing, secret: config.signing.secret! }, systemClock);
    const app = createInventoryApp({
      repository,
      verifier,
      logger: createLogger('silent'),
      maxBodyBytes: () => config.server.maxBodyBytes,
      metrics,
    });

    const res = await request(app).get('/readyz');
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ code: 'service_unavailable', message: expect.stringMatching(/database/), status: 503 });

    const samples = parseMetrics((await request(app).get('/metrics')).text);
    expect(byRequest(samples, 'inventory_http_requests_total')).toEqual({ 'GET /readyz 503': 1 });
    expect(
      samples.find((s) => s.name === 'inventory_sqlite_query_duration_seconds_count' && s.labels.statement === 'ping')
        ?.value,
    ).toBe(1);
  });

  it('a 500 still writes one request line, at error, with the same fields', async () => {
    const dir = makeTempDir('inventory-obs-500');
    const config = testConfig(dir);
    const repository = new SqlitePetRepository(openInventoryDatabase(path.join(dir, 'inventory.sqlite')), systemClock);
    repository.close();
    const verifier = new UpstreamTokenVerifier({ ...config.signing, secret: config.signing.secret! }, systemClock);
    const logs = new LogCapture();
    const app = createInventoryApp({
      repository,
      verifier,
      logger: createLogger('info', logs),
      maxBodyBytes: () => config.server.maxBodyBytes,
    });
    const token = await tokenSigner(config).sign({ keyId: 'key-500', plan: 'free' });

    const res = await request(app).get('/v1/pets').set(UPSTREAM_TOKEN_HEADER, token).set('X-Request-Id', 'obs-500');
    expect(res.status).toBe(500);
    const line = await eventuallyLogLine(logs, { msg: 'request', requestId: 'obs-500' });
    expect(line).toMatchObject({ level: 50, method: 'GET', route: '/v1/pets', status: 500, keyId: 'key-500' });
    expect(line).not.toHaveProperty('err');
    expect(logs.text()).not.toContain(token);
  });
});

describe('the standalone inventory process', () => {
  it('serves its metrics with the default process metrics on its own listener', async () => {
    const dataDir = makeTempDir('inventory-obs-process');
    const proc = await spawnInventoryProcess({ dataDir });
    try {
      const res = await fetch(`${proc.url}/metrics`);
      expect(res.status).toBe(200);
      const names = new Set(parseMetrics(await res.text()).map((s) => s.name));
      expect(names.has('process_cpu_user_seconds_total')).toBe(true);
      expect(names.has('inventory_http_requests_total')).toBe(true);
      expect(names.has('inventory_sqlite_query_duration_seconds_count')).toBe(true);
    } finally {
      await stopInventoryProcess(proc);
    }
  }, 180_000); // starts a process: the start guard (150 s) plus the test
});

describe('the gateway never serves or forwards the inventory metrics', () => {
  let product: ProductHarness;
  let auth: string;

  beforeAll(async () => {
    product = await startTestProduct({ redis: false });
    const { key } = await product.keyService.create({ name: 'observability', plan: 'free' });
    auth = `Bearer ${key}`;
  });

  afterAll(async () => {
    await product?.close();
  });

  it.each([
    ['/metrics', false],
    ['/metrics', true],
    ['/v1/../metrics', true],
    ['/v1/%2e%2e/metrics', true],
    ['/v1/pets/../../metrics', true],
    ['/v1//metrics', true],
    ['/v1/metrics', true],
  ])('%s (with key: %s) is a 404 from the gateway', async (rawPath, withKey) => {
    const res = await rawRequest(product.gatewayUrl, {
      method: 'GET',
      path: rawPath,
      headers: withKey ? { Authorization: auth } : {},
    });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ code: 'not_found', message: expect.any(String), status: 404 });
    expect(res.text).not.toContain('inventory_');
  });

  it('an encoded slash reaches the inventory only as a pets id, which it refuses', async () => {
    const res = await rawRequest(product.gatewayUrl, {
      method: 'GET',
      path: '/v1/pets/..%2F..%2Fmetrics',
      headers: { Authorization: auth },
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ code: 'invalid_parameter', message: expect.any(String), status: 400 });
  });

  it('the embedded inventory saw none of those requests, and the admin /metrics serves its metrics beside the gateway ones', async () => {
    // Run after the cases above (jest runs a file's tests in order).
    const inventory = product.inventory!;
    expect(inventory.metrics).toBeInstanceOf(Registry);
    const inventoryText = await inventory.metrics.metrics();
    const counts = byRequest(parseMetrics(inventoryText), 'inventory_http_requests_total');
    expect(counts).toEqual({ 'GET /v1/pets/{petId} 400': 1 });
    const inventoryLines = logLines(product.logs).filter(
      (line) => line.component === 'inventory' && line.msg === 'request',
    );
    expect(inventoryLines.map((line) => [line.route, line.status])).toEqual([['/v1/pets/{petId}', 400]]);

    // The admin /metrics serves the embedded inventory's metrics beside the gateway's, each name once.
    const adminText = (await request(product.adminUrl).get('/metrics')).text;
    const typeLines = (text: string) => [...text.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]);
    for (const name of typeLines(inventoryText)) expect(typeLines(adminText).filter((n) => n === name)).toEqual([name]);
    expect(adminText).toMatch(
      /^inventory_http_requests_total\{method="GET",route="\/v1\/pets\/\{petId\}",status_code="400"\} 1$/m,
    );
    expect(adminText).toMatch(/^gateway_http_requests_total\{/m);
    expect(inventoryText).not.toMatch(/^process_/m);
  });
});
