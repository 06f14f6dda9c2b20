import request from 'supertest';
import { uniqueNamespace } from '../../support/test-redis';
import { expectMatchesOpenApi } from '../../support/openapi';
import {
  admin,
  expectRateLimitHeaders,
  header,
  sequentially,
  startRecordingUpstream,
  startTestProduct,
  type ProductHarness,
  type TestUpstream,
} from './gateway-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/** CONTRACT §4: who may call, and how callers without a valid key are limited. */
describe('API keys', () => {
  const namespace = uniqueNamespace('auth');
  let upstream: TestUpstream;
  let product: ProductHarness;
  let staging: ProductHarness;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    product = await startTestProduct({
      namespace,
      overrides: { upstream: { url: upstream.url }, anonymous: { perMinute: 1000 } },
    });
    // The staging product shares the development one's store: only the key's prefix can tell them apart.
    staging = await startTestProduct({ env: { APP_ENV: 'staging' }, namespace });
  });

  afterAll(async () => {
    await staging?.close();
    await product?.close();
    await upstream?.close();
  });

  const get = (auth?: string) => {
    const req = request(product.gatewayUrl).get('/v1/pets');
    return auth === undefined ? req : req.set('Authorization', auth);
  };

  it('no Authorization header: 401 missing_api_key', async () => {
    for (const res of [await get(), await get('')]) {
      expectError(res, 401, 'missing_api_key');
      expectRateLimitHeaders(res);
      expectMatchesOpenApi('GET', '/pets', res);
    }
  });

  it('a key that is not one of ours: 401 invalid_api_key', async () => {
    const { key } = await createKey(product, { plan: 'free' });
    const forwardedBefore = upstream.requests.length;
    const variants = [
      'Bearer asg_dev_' + '0'.repeat(32), // well formed, unknown
      `Bearer ${key.slice(0, -1)}${key.endsWith('a') ? 'b' : 'a'}`, // one character off
      `Bearer ${key.slice(0, 20)}`, // truncated
      `Basic ${Buffer.from(`${key}:`).toString('base64')}`, // another scheme
      key, // no scheme
      'Bearer ',
      `Bearer ${'x'.repeat(5000)}`,
    ];
    for (const auth of variants) {
      const res = await get(auth);
      expect({ auth: auth.slice(0, 40), status: res.status, code: (res.body as { code?: string }).code }).toEqual({
        auth: auth.slice(0, 40),
        status: 401,
        code: 'invalid_api_key',
      });
    }
    expect(upstream.requests).toHaveLength(forwardedBefore);
    // The real key itself is accepted, scheme case-insensitively.
    expect((await get(`bearer ${key}`)).status).toBe(200);
  });

  it('a revoked key: 401 revoked_api_key, from the moment the admin API answers 204', async () => {
    const { auth, id } = await createKey(product, { plan: 'free' });
    await get(auth).expect(200);
    await admin(product).delete(`/admin/keys/${id}`).expect(204);
    const res = await get(auth);
    expectError(res, 401, 'revoked_api_key');
    expectRateLimitHeaders(res);
    const listed = (await admin(product).get(`/admin/keys/${id}`).expect(200)).body as { revokedAt: string | null };
    expect(listed.revokedAt).toEqual(expect.any(String));
  });

  it('a staging-format key (asg_test_…) is refused by a development gateway', async () => {
    const res = await get('Bearer asg_test_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6');
    expectError(res, 401, 'invalid_api_key');
  });

  it('a real key created by a staging product is refused by the development gateway, though both share a store', async () => {
    const forwardedBefore = upstream.requests.length;
    const { key } = await staging.keyService.create({ name: 'staging client', plan: 'free' });
    expect(key).toMatch(/^asg_test_[0-9A-Za-z]{22,}$/);
    // Served where it belongs…
    const onStaging = await request(staging.gatewayUrl).get('/v1/pets').set('Authorization', `Bearer ${key}`);
    expect(onStaging.status).toBe(200);
    // …and the development product's key service does see the record, yet its gateway refuses the key.
    expect((await product.keyService.list()).some((record) => record.name === 'staging client')).toBe(true);
    const onDevelopment = await get(`Bearer ${key}`);
    expectError(onDevelopment, 401, 'invalid_api_key');
    expect(upstream.requests).toHaveLength(forwardedBefore);
  });

  it('a development key is refused by the staging gateway', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    expectError(await request(staging.gatewayUrl).get('/v1/pets').set('Authorization', auth), 401, 'invalid_api_key');
  });
});

/** Requests without a valid key are limited per client address (config anonymous.perMinute). */
describe('anonymous requests', () => {
  let product: ProductHarness;

  beforeAll(async () => {
    product = await startTestProduct({ overrides: { anonymous: { perMinute: 3 } } });
  });

  afterAll(async () => {
    await product?.close();
  });

  it('the 4th request without a valid key from one address is 429 rate_limited with the anonymous headers', async () => {
    const responses = await sequentially(4, (i) => {
      const req = request(product.gatewayUrl).get('/v1/pets');
      // Missing and bad keys count alike.
      return i % 2 === 0 ? req : req.set('Authorization', 'Bearer asg_dev_' + 'Z'.repeat(32));
    });
    expect(responses.slice(0, 3).map((r) => [r.status, header(r, 'x-ratelimit-remaining')])).toEqual([
      [401, '2'],
      [401, '1'],
      [401, '0'],
    ]);

    const refused = responses[3]!;
    expectError(refused, 429, 'rate_limited');
    const headers = expectRateLimitHeaders(refused);
    expect(headers).toMatchObject({ limit: 3, remaining: 0 });
    expect(headers.policy).toBe('"anonymous";q=3;w=60');
    expect(headers.rateLimit).toMatch(/^"anonymous";r=0;t=\d+$/);
    const retryAfter = Number(header(refused, 'retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expectMatchesOpenApi('GET', '/pets', refused);
  });

  it('a valid key from the same address is not held back by the anonymous limit', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const res = await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth);
    expect(res.status).toBe(200);
    expect(header(res, 'ratelimit-policy')).toBe('"minute";q=60;w=60, "day";q=1000;w=86400');
  });
});

/** X-Forwarded-For names the client only when the socket is a configured trusted proxy. */
describe('client address behind a proxy', () => {
  let trusting: ProductHarness;
  let untrusting: ProductHarness;

  beforeAll(async () => {
    const anonymous = { perMinute: 2 };
    trusting = await startTestProduct({
      overrides: { anonymous, server: { host: '127.0.0.1', trustedProxies: ['127.0.0.1'] } },
    });
    untrusting = await startTestProduct({
      overrides: { anonymous, server: { host: '127.0.0.1', trustedProxies: [] } },
    });
  });

  afterAll(async () => {
    await trusting?.close();
    await untrusting?.close();
  });

  const anonymousFrom = (product: ProductHarness, forwardedFor: string) =>
    request(product.gatewayUrl).get('/v1/pets').set('X-Forwarded-For', forwardedFor);

  it('from a trusted proxy, each forwarded client has its own anonymous window', async () => {
    const first = await sequentially(3, () => anonymousFrom(trusting, '203.0.113.10'));
    expect(first.map((r) => r.status)).toEqual([401, 401, 429]);
    // Another client behind the same proxy starts afresh; in a chain the nearest untrusted hop is the client.
    expect((await anonymousFrom(trusting, '203.0.113.11')).status).toBe(401);
    expect(header(await anonymousFrom(trusting, '198.51.100.1, 203.0.113.12'), 'x-ratelimit-remaining')).toBe('1');
  });

  it('from an untrusted socket, X-Forwarded-For is ignored: every claimed address shares the socket’s window', async () => {
    const responses = await sequentially(3, (i) => anonymousFrom(untrusting, `203.0.113.${20 + i}`));
    expect(responses.map((r) => r.status)).toEqual([401, 401, 429]);
    expect(header(responses[2]!, 'ratelimit-policy')).toBe('"anonymous";q=2;w=60');
  });
});

/**
 * Issue 48 (items 8, 13): trustedProxies are read as allowedAddresses are (CIDR ranges, any
 * written IPv6 form), matched against a real IPv6 loopback socket; the anonymous window is an IPv6
 * client's /64, zone ids and IPv4 mappings making none of their own.
 */
describe('trusted proxies as ranges and in any written form, and the anonymous window of an IPv6 client', () => {
  let ranged: ProductHarness;
  let nonCanonical: ProductHarness;
  let trusting: ProductHarness;

  beforeAll(async () => {
    const anonymous = { perMinute: 2 };
    // On every address of both families, so that a client can come over ::1.
    ranged = await startTestProduct({
      redis: false,
      overrides: { anonymous, server: { host: '::', trustedProxies: ['10.0.0.0/8', '::1/128'] } },
    });
    nonCanonical = await startTestProduct({
      redis: false,
      overrides: { anonymous, server: { host: '::', trustedProxies: ['0:0:0:0:0:0:0:1'] } },
    });
    trusting = await startTestProduct({
      redis: false,
      overrides: { anonymous, server: { host: '127.0.0.1', trustedProxies: ['127.0.0.1'] } },
    });
  });

  afterAll(async () => {
    await ranged?.close();
    await nonCanonical?.close();
    await trusting?.close();
  });

  /** An anonymous GET over IPv6 loopback (or the product's own URL), claiming X-Forwarded-For; its status and anonymous window. */
  async function anonymousOver(
    product: ProductHarness,
    forwardedFor: string,
    overIpv6 = true,
  ): Promise<[number, string | null]> {
    const url = overIpv6 ? `http://[::1]:${new URL(product.gatewayUrl).port}/v1/pets` : `${product.gatewayUrl}/v1/pets`;
    const res = await fetch(url, { headers: { 'x-forwarded-for': forwardedFor } });
    await res.arrayBuffer();
    return [res.status, res.headers.get('x-ratelimit-remaining')];
  }

  it.each([
    ['a CIDR range (::1/128)', () => ranged],
    ['a non-canonical IPv6 address (0:0:0:0:0:0:0:1)', () => nonCanonical],
  ])('a socket inside %s is a trusted proxy: each forwarded client has its own window', async (_name, product) => {
    expect(await anonymousOver(product(), '203.0.113.40')).toEqual([401, '1']);
    expect(await anonymousOver(product(), '203.0.113.40')).toEqual([401, '0']);
    expect((await anonymousOver(product(), '203.0.113.40'))[0]).toBe(429);
    // Another client behind the same proxy starts afresh.
    expect(await anonymousOver(product(), '203.0.113.41')).toEqual([401, '1']);
  });

  it('hops inside a trusted range (10.0.0.0/8) are skipped: the client is the nearest hop outside it', async () => {
    expect(await anonymousOver(ranged, '203.0.113.50, 10.1.2.3')).toEqual([401, '1']);
    expect(await anonymousOver(ranged, '198.51.100.9, 203.0.113.50, 10.200.0.1, 10.1.2.3')).toEqual([401, '0']);
  });

  it('two addresses of one IPv6 /64 share one anonymous window; the next /64 has its own', async () => {
    expect(await anonymousOver(trusting, '2001:db8:1:2::a', false)).toEqual([401, '1']);
    expect(await anonymousOver(trusting, '2001:db8:1:2:ffff:eeee:dddd:cccc', false)).toEqual([401, '0']);
    expect((await anonymousOver(trusting, '2001:db8:1:2::b', false))[0]).toBe(429);
    expect(await anonymousOver(trusting, '2001:db8:1:3::a', false)).toEqual([401, '1']);
  });

  it('a zone id makes no window of its own: fe80::1%eth0 and fe80::1 share one', async () => {
    expect(await anonymousOver(trusting, 'fe80::1%eth0', false)).toEqual([401, '1']);
    expect(await anonymousOver(trusting, 'fe80::1', false)).toEqual([401, '0']);
    expect((await anonymousOver(trusting, 'fe80::1%eth1', false))[0]).toBe(429);
  });
});
