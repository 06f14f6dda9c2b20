import { Writable } from 'node:stream';
import path from 'node:path';
import request from 'supertest';
import { createInventoryApp } from '../../../src/inventory/app';
import { openInventoryDatabase } from '../../../src/inventory/database';
import { SqlitePetRepository, type PetRepository } from '../../../src/inventory/pet-repository';
import { systemClock } from '../../../src/shared/clock';
import { createLogger } from '../../../src/shared/logger';
import { logLines } from '../../support/log-lines';
import { UPSTREAM_TOKEN_HEADER, UpstreamTokenVerifier } from '../../../src/shared/http/upstream-token';
import {
  makeTempDir,
  rawRequest,
  startTestInventory,
  testConfig,
  tokenSigner,
  type TestInventory,
} from '../../support/inventory-harness';

describe('inventory: routes, methods and error shapes', () => {
  let inventory: TestInventory;
  let token: string;

  beforeAll(async () => {
    inventory = await startTestInventory();
    token = await inventory.token();
    await inventory.createPet({ name: 'Rex', categoryId: 1 });
  });
  afterAll(async () => {
    await inventory.close();
  });

  const send = (method: string, path: string, headers: Record<string, string> = {}) =>
    rawRequest(inventory.url, { method, path, headers: { [UPSTREAM_TOKEN_HEADER]: token, ...headers } });

  it('the deprecated GET /v1/pets/{petId} answers an unknown id with the Error body', async () => {
    const res = await send('GET', '/v1/pets/424242');
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ code: 'not_found', message: 'No pet with id 424242.', status: 404 });
  });

  it.each([
    ['DELETE', '/v1/pets', 'GET, HEAD, POST'],
    ['PUT', '/v1/pets', 'GET, HEAD, POST'],
    ['PATCH', '/v1/pets', 'GET, HEAD, POST'],
    ['OPTIONS', '/v1/pets', 'GET, HEAD, POST'],
    ['DELETE', '/v1/pets/1', 'GET, HEAD'],
    ['PUT', '/v1/pets/1', 'GET, HEAD'],
    ['POST', '/v1/pets/1', 'GET, HEAD'],
    ['POST', '/healthz', 'GET, HEAD'],
    ['DELETE', '/readyz', 'GET, HEAD'],
  ])('%s %s → 405 with Allow: %s', async (method, path, allow) => {
    const res = await send(method, path);
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe(allow);
    expect(res.body).toEqual({ code: 'method_not_allowed', message: expect.stringContaining(allow), status: 405 });
  });

  it('a 405 changes nothing: the pet a DELETE named is still there', async () => {
    await send('DELETE', '/v1/pets/1');
    expect((await send('GET', '/v1/pets/1')).body).toMatchObject({ id: 1, name: 'Rex' });
  });

  it('HEAD is served wherever GET is (listed in Allow), with headers and no body', async () => {
    for (const path of ['/v1/pets', '/v1/pets/1', '/healthz']) {
      const res = await send('HEAD', path);
      expect({ path, status: res.status, text: res.text }).toEqual({ path, status: 200, text: '' });
      expect(res.headers['x-request-id']).toEqual(expect.any(String));
    }
  });

  it.each([
    ['/v1/unknown', true],
    ['/v1', true],
    ['/v1/', true],
    ['/v1/pets/', true],
    ['/v1/pets/1/owner', true],
    ['/V1/pets', false],
    ['/v2/pets', false],
    ['/', false],
    ['/pets', false],
    ['/index.html', false],
  ])('unknown path %s → 404 JSON (token sent: %s)', async (path, withToken) => {
    const res = await rawRequest(inventory.url, {
      method: 'GET',
      path,
      headers: withToken ? { [UPSTREAM_TOKEN_HEADER]: token } : {},
    });
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ code: 'not_found', message: expect.any(String), status: 404 });
  });

  it('an undecodable path is a JSON 400, never an HTML page', async () => {
    const res = await send('GET', '/v1/pets/%E0%A4%A');
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'invalid_parameter', status: 400 });
  });

  it('/healthz and /readyz answer without a token', async () => {
    const health = await rawRequest(inventory.url, { method: 'GET', path: '/healthz' });
    expect({ status: health.status, body: health.body }).toEqual({ status: 200, body: { status: 'ok' } });
    const ready = await rawRequest(inventory.url, { method: 'GET', path: '/readyz' });
    expect({ status: ready.status, body: ready.body }).toEqual({ status: 200, body: { status: 'ok' } });
  });

  describe('X-Request-Id', () => {
    it.each(['abc-123', 'gw:2f1c.9_A', 'x'.repeat(128)])('keeps a sane incoming id %j', async (id) => {
      expect((await send('GET', '/v1/pets/1', { 'X-Request-Id': id })).headers['x-request-id']).toBe(id);
    });

    it.each(['x'.repeat(129), 'has space', 'semi;colon', 'é', ''])('replaces %j with a fresh UUID', async (id) => {
      const got = (await send('GET', '/v1/pets/1', { 'X-Request-Id': id })).headers['x-request-id'];
      expect(got).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    });

    it('is on every kind of response and differs between requests', async () => {
      const responses = await Promise.all([
        send('GET', '/v1/pets'),
        send('GET', '/nope'),
        send('DELETE', '/v1/pets'),
        rawRequest(inventory.url, { method: 'GET', path: '/v1/pets' }),
      ]);
      const ids = responses.map((r) => r.headers['x-request-id']);
      expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
      expect(new Set(ids).size).toBe(ids.length);
    });
  });
});

describe('inventory: failures inside the service', () => {
  function captureLogs(): { logger: ReturnType<typeof createLogger>; lines: () => Array<Record<string, unknown>> } {
    const chunks: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        chunks.push(chunk.toString());
        done();
      },
    });
    return {
      logger: createLogger('warn', sink),
      lines: () => logLines(chunks.join('')),
    };
  }

  async function appWithClosedDatabase() {
    const dir = makeTempDir('inventory-broken');
    const config = testConfig(dir);
    const repository: PetRepository = new SqlitePetRepository(
      openInventoryDatabase(path.join(dir, 'inventory.sqlite')),
      systemClock,
    );
    repository.close();
    const logs = captureLogs();
    const verifier = new UpstreamTokenVerifier({ ...config.signing, secret: config.signing.secret! }, systemClock);
    const app = createInventoryApp({
      repository,
      verifier,
      logger: logs.logger,
      maxBodyBytes: () => config.server.maxBodyBytes,
    });
    return { app, logs, token: await tokenSigner(config).sign({ keyId: 'k', plan: 'free' }) };
  }

  it('/readyz answers 503 service_unavailable naming the database when SELECT 1 fails', async () => {
    const { app } = await appWithClosedDatabase();
    const res = await request(app).get('/readyz');
    expect(res.status).toBe(503);
    expect(res.body).toEqual({
      code: 'service_unavailable',
      message: expect.stringContaining('database'),
      status: 503,
    });
  });

  it('a thrown bug is a 500 internal_error with a generic message; the details go to the log only', async () => {
    const { app, logs, token } = await appWithClosedDatabase();
    const res = await request(app).get('/v1/pets').set(UPSTREAM_TOKEN_HEADER, token).set('X-Request-Id', 'trace-me');
    expect(res.status).toBe(500);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ code: 'internal_error', message: 'An internal error occurred.', status: 500 });
    expect(res.text).not.toMatch(/database connection is not open|\bat\b.*\.ts/);
    const logged = logs.lines().find((line) => line.msg === 'request failed');
    expect(logged).toMatchObject({
      requestId: 'trace-me',
      method: 'GET',
      path: '/v1/pets',
      err: { message: expect.stringContaining('not open') },
    });
  });
});
