import http from 'node:http';
import request from 'supertest';
import { systemClock } from '../../../src/shared/clock';
import { UPSTREAM_TOKEN_HEADER, UpstreamTokenVerifier } from '../../../src/shared/http/upstream-token';
import { expectMatchesOpenApi } from '../../support/openapi';
import {
  closedPortUrl,
  countPets,
  expectRateLimitHeaders,
  header,
  startRecordingUpstream,
  startSilentUpstream,
  startTestProduct,
  type ProductHarness,
  type TestUpstream,
} from './gateway-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

const MAX_BODY = 16 * 1024;

/** A JSON body of exactly `bytes` bytes. */
function jsonBodyOf(bytes: number): string {
  const skeleton = JSON.stringify({ name: '', categoryId: 1 });
  return JSON.stringify({ name: 'x'.repeat(bytes - skeleton.length), categoryId: 1 });
}

/** POSTs `body` with Transfer-Encoding: chunked (no Content-Length), in 1 KiB chunks. */
function postChunked(
  gatewayUrl: string,
  auth: string,
  body: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${gatewayUrl}/v1/pets`, {
      method: 'POST',
      headers: { Authorization: auth, 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    // The gateway may answer 413 and close before the last chunk is written; the answer is what counts.
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(err);
    });
    for (let offset = 0; offset < body.length; offset += 1024) req.write(body.slice(offset, offset + 1024));
    req.end();
  });
}

/** What the inventory receives: a tiny upstream of our own records every header. */
describe('requests as the upstream sees them', () => {
  let upstream: TestUpstream;
  let product: ProductHarness;
  let verifier: UpstreamTokenVerifier;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    product = await startTestProduct({ overrides: { upstream: { url: upstream.url } } });
    verifier = new UpstreamTokenVerifier(
      { ...product.config.signing, secret: product.config.signing.secret! },
      systemClock,
    );
  });

  afterAll(async () => {
    await product?.close();
    await upstream?.close();
  });

  it('client credentials and x-gateway-* headers never reach it; the gateway’s own token, request id and X-Forwarded-* do', async () => {
    const { auth, id } = await createKey(product, { plan: 'pro' });
    const forgedToken = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiIsInBsYW4iOiJlbnRlcnByaXNlIn0.forged';
    const res = await request(product.gatewayUrl)
      .get('/v1/pets?limit=5&status=available')
      .set('Authorization', auth)
      .set('X-Gateway-Token', forgedToken)
      .set('X-Gateway-Plan', 'enterprise')
      .set('X-Gateway-Anything', 'sneaky')
      .set('Proxy-Authorization', 'Basic c2VjcmV0')
      .set('Cookie', 'session=abc')
      .set('X-Forwarded-For', '6.6.6.6')
      .set('X-Forwarded-Host', 'evil.example')
      .set('X-Forwarded-Proto', 'https')
      .set('Forwarded', 'for=6.6.6.6;host=evil.example')
      .set('X-Real-IP', '6.6.6.6')
      .set('X-Request-Id', 'client-trace-42')
      .set('X-Custom-Client', 'kept');

    expect(res.status).toBe(200);
    expect(header(res, 'x-request-id')).toBe('client-trace-42');
    expectRateLimitHeaders(res);
    expect(upstream.requests).toHaveLength(1);
    const seen = upstream.requests[0]!;
    expect(seen.method).toBe('GET');
    expect(seen.url).toBe('/v1/pets?limit=5&status=available');

    for (const name of [
      'authorization',
      'proxy-authorization',
      'cookie',
      'forwarded',
      'x-real-ip',
      'x-gateway-plan',
      'x-gateway-anything',
    ]) {
      expect({ name, value: seen.headers[name] }).toEqual({ name, value: undefined });
    }
    const gatewayHeaders = Object.keys(seen.headers).filter((name) => name.startsWith('x-gateway-'));
    expect(gatewayHeaders).toEqual([UPSTREAM_TOKEN_HEADER]);
    const token = seen.headers[UPSTREAM_TOKEN_HEADER] as string;
    expect(token).not.toBe(forgedToken);
    expect(await verifier.verify(token)).toEqual({ keyId: id, plan: 'pro' });

    expect(seen.headers['x-request-id']).toBe('client-trace-42');
    // trustedProxies is empty: the socket is the client, whatever it claims.
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(seen.headers['x-forwarded-proto']).toBe('http');
    expect(seen.headers['x-forwarded-host']).toBe(new URL(product.gatewayUrl).host);
    expect(seen.headers['x-custom-client']).toBe('kept');
  });

  it('a generated request id is the one forwarded and the one answered', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const before = upstream.requests.length;
    const res = await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
    const answered = header(res, 'x-request-id');
    expect(answered).toMatch(/^[0-9a-f-]{36}$/);
    expect(upstream.requests[before]!.headers['x-request-id']).toBe(answered);
  });

  it('headers named in Connection are dropped as hop-by-hop', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const before = upstream.requests.length;
    await request(product.gatewayUrl)
      .get('/v1/pets')
      .set('Authorization', auth)
      .set('Connection', 'keep-alive, X-Hop-Secret')
      .set('X-Hop-Secret', 's3cr3t')
      .expect(200);
    expect(upstream.requests[before]!.headers['x-hop-secret']).toBeUndefined();
  });

  it('a body of exactly 16 KiB is forwarded whole, with Content-Length and chunked', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const body = jsonBodyOf(MAX_BODY);
    expect(Buffer.byteLength(body)).toBe(MAX_BODY);
    const before = upstream.requests.length;

    await request(product.gatewayUrl)
      .post('/v1/pets')
      .set('Authorization', auth)
      .set('Content-Type', 'application/json')
      .send(body)
      .expect(200);
    const chunked = await postChunked(product.gatewayUrl, auth, body);
    expect(chunked.status).toBe(200);
    expect(upstream.requests.slice(before).map((r) => r.body.length)).toEqual([MAX_BODY, MAX_BODY]);
  });

  it('a body over 16 KiB is 413 payload_too_large by Content-Length, without forwarding', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const before = upstream.requests.length;
    const res = await request(product.gatewayUrl)
      .post('/v1/pets')
      .set('Authorization', auth)
      .set('Content-Type', 'application/json')
      .send(jsonBodyOf(MAX_BODY + 1));
    expectError(res, 413, 'payload_too_large');
    expectRateLimitHeaders(res);
    expectMatchesOpenApi('POST', '/pets', res);
    expect(upstream.requests).toHaveLength(before);
  });

  it('a chunked body over 16 KiB (no Content-Length) is 413 payload_too_large, never delivered whole', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const before = upstream.requests.length;
    const res = await postChunked(product.gatewayUrl, auth, jsonBodyOf(64 * 1024));
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({ code: 'payload_too_large', message: expect.any(String), status: 413 });
    expect(res.headers['x-ratelimit-limit']).toBe('60');
    // Give an abandoned upstream request the chance to show up, then check none arrived complete.
    await new Promise((resolve) => setImmediate(resolve));
    expect(upstream.requests.slice(before).filter((r) => r.body.length > MAX_BODY)).toEqual([]);
  });
});

describe('X-Request-Id', () => {
  let product: ProductHarness;
  let auth: string;

  beforeAll(async () => {
    product = await startTestProduct();
    ({ auth } = await createKey(product, { plan: 'pro' }));
  });

  afterAll(async () => {
    await product?.close();
  });

  it('a sane client id is kept', async () => {
    for (const id of ['abc', 'A-Z_0.9:trace', 'x'.repeat(128)]) {
      const res = await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).set('X-Request-Id', id);
      expect(header(res, 'x-request-id')).toBe(id);
    }
  });

  it('an insane one is replaced (too long, bad characters, repeated)', async () => {
    const insane = ['x'.repeat(129), 'has spaces in it', 'semi;colon', 'quote"d', '<script>'];
    for (const id of insane) {
      const res = await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).set('X-Request-Id', id);
      const answered = header(res, 'x-request-id');
      expect(answered).not.toBe(id);
      expect(answered).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    }
    // Two X-Request-Id lines on the wire.
    const repeated = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http
        .get(
          `${product.gatewayUrl}/v1/pets`,
          { headers: { Authorization: auth, 'X-Request-Id': ['one', 'two'] } },
          (res) => resolve(res.resume()),
        )
        .on('error', reject);
    });
    expect(repeated.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('every response has one, outside /v1 and without a key too', async () => {
    for (const res of [
      await request(product.gatewayUrl).get('/'),
      await request(product.gatewayUrl).get('/v1/pets'),
      await request(product.gatewayUrl).get('/v2/pets'),
    ]) {
      expect(header(res, 'x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  it('distinct requests get distinct ids', async () => {
    const ids = new Set<string | undefined>();
    for (let i = 0; i < 5; i++)
      ids.add(header(await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth), 'x-request-id'));
    expect(ids.size).toBe(5);
  });
});

describe('when the upstream fails', () => {
  let refusing: ProductHarness;
  let silent: TestUpstream;
  let timingOut: ProductHarness;

  beforeAll(async () => {
    refusing = await startTestProduct({ overrides: { upstream: { url: await closedPortUrl() } } });
    silent = await startSilentUpstream();
    timingOut = await startTestProduct({ overrides: { upstream: { url: silent.url, timeoutMs: 300 } } });
  });

  afterAll(async () => {
    await refusing?.close();
    await timingOut?.close();
    await silent?.close();
  });

  it('502 upstream_unavailable when it refuses connections, with the Error body and rate-limit headers', async () => {
    const { auth } = await createKey(refusing, { plan: 'free' });
    const list = await request(refusing.gatewayUrl).get('/v1/pets').set('Authorization', auth);
    expectError(list, 502, 'upstream_unavailable');
    expect(expectRateLimitHeaders(list)).toMatchObject({ limit: 60, remaining: 59 });
    expectMatchesOpenApi('GET', '/pets', list);

    const create = await request(refusing.gatewayUrl)
      .post('/v1/pets')
      .set('Authorization', auth)
      .send({ name: 'Lost', categoryId: 1 });
    expectError(create, 502, 'upstream_unavailable');
    expectMatchesOpenApi('POST', '/pets', create);

    const item = await request(refusing.gatewayUrl).get('/v1/pets/3').set('Authorization', auth);
    expectError(item, 502, 'upstream_unavailable');
    expect(header(item, 'deprecation')).toMatch(/^@\d+$/);
    expectMatchesOpenApi('GET', '/pets/{petId}', item);
  });

  it('504 upstream_timeout when it never answers (upstream.timeoutMs 300)', async () => {
    const { auth } = await createKey(timingOut, { plan: 'free' });
    const started = Date.now();
    const res = await request(timingOut.gatewayUrl).get('/v1/pets').set('Authorization', auth);
    const took = Date.now() - started;

    expectError(res, 504, 'upstream_timeout');
    expect(expectRateLimitHeaders(res)).toMatchObject({ limit: 60, remaining: 59 });
    expectMatchesOpenApi('GET', '/pets', res);
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(3000);
    expect(silent.requests.map((r) => r.url)).toEqual(['/v1/pets']);
  });

  it('several requests in flight each time out on their own', async () => {
    const { auth } = await createKey(timingOut, { plan: 'free' });
    const responses = await Promise.all(
      [0, 1, 2].map(() => request(timingOut.gatewayUrl).get('/v1/pets').set('Authorization', auth)),
    );
    expect(responses.map((r) => r.status)).toEqual([504, 504, 504]);
  });
});

/** With the real inventory behind it. */
describe('the real inventory behind the gateway', () => {
  let product: ProductHarness;
  let staging: ProductHarness;

  beforeAll(async () => {
    product = await startTestProduct();
    staging = await startTestProduct({ env: { APP_ENV: 'staging' } });
  });

  afterAll(async () => {
    await product?.close();
    await staging?.close();
  });

  it('the next-page Link points at the gateway, not the inventory, and can be followed to the last page', async () => {
    const { auth } = await createKey(product, { plan: 'pro' });
    for (const name of ['One', 'Two', 'Three']) {
      await request(product.gatewayUrl)
        .post('/v1/pets')
        .set('Authorization', auth)
        .send({ name, categoryId: 4, status: 'pending' })
        .expect(201);
    }
    const names: string[] = [];
    let next: string | undefined = `${product.gatewayUrl}/v1/pets?limit=2&status=pending`;
    let pages = 0;
    while (next) {
      const url: URL = new URL(next);
      expect(url.origin).toBe(product.gatewayUrl);
      const res = await request(url.origin)
        .get(url.pathname + url.search)
        .set('Authorization', auth)
        .expect(200);
      expectMatchesOpenApi('GET', '/pets', res);
      names.push(...(res.body as Array<{ name: string }>).map((pet) => pet.name));
      const link = header(res, 'link');
      next = link === undefined ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1];
      if (link !== undefined) expect(next).toContain('limit=2&status=pending&cursor=');
      pages += 1;
    }
    expect(names).toEqual(['One', 'Two', 'Three']);
    expect(pages).toBe(2);
  });

  it('with server.publicBaseUrl set (staging), the Link is built on it', async () => {
    const { key } = await staging.keyService.create({ name: 'pager', plan: 'pro' });
    const auth = `Bearer ${key}`;
    for (const name of ['A', 'B'])
      await request(staging.gatewayUrl)
        .post('/v1/pets')
        .set('Authorization', auth)
        .send({ name, categoryId: 1 })
        .expect(201);
    const res = await request(staging.gatewayUrl).get('/v1/pets?limit=1').set('Authorization', auth).expect(200);
    expect(header(res, 'link')).toMatch(
      /^<https:\/\/staging-api\.animalstore\.example\/v1\/pets\?limit=1&cursor=[A-Za-z0-9_-]+>; rel="next"$/,
    );
  });

  it('writes no pet for a 413, by Content-Length or chunked', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const before = countPets(product);
    const big = jsonBodyOf(MAX_BODY + 100);
    const declared = await request(product.gatewayUrl)
      .post('/v1/pets')
      .set('Authorization', auth)
      .set('Content-Type', 'application/json')
      .send(big);
    expectError(declared, 413, 'payload_too_large');
    const chunked = await postChunked(product.gatewayUrl, auth, big);
    expect(chunked.status).toBe(413);
    expect(countPets(product)).toBe(before);

    // A pet of ordinary size is still written.
    await request(product.gatewayUrl)
      .post('/v1/pets')
      .set('Authorization', auth)
      .send({ name: 'Small', categoryId: 1 })
      .expect(201);
    expect(countPets(product)).toBe(before + 1);
  });
});
