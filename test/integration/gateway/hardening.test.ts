import http from 'node:http';
import net from 'node:net';
import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import { FAILED_TOKEN_DELAY_MS } from '../../../src/admin/failed-tokens';
import { uniqueNamespace } from '../../support/test-redis';
import { sendRaw } from '../reliability/raw-http';
import {
  admin,
  expectRateLimitHeaders,
  header,
  MID_MINUTE,
  sequentially,
  startRecordingUpstream,
  startTestProduct,
  type ProductHarness,
  type TestUpstream,
} from './gateway-kit';
import { eventually } from '../../support/eventually';
import { logLines } from '../../support/log-lines';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/**
 * What black-box probes found (issue 14), each on the real server over loopback: revoked keys
 * answered 401 whatever their address has used, the 401 challenge, CORS, and the listener's bounds
 * on slow and numerous clients. Parser refusals and the bad-input catalogue have their own suites
 * under test/integration/reliability.
 */

const ANONYMOUS_PER_MINUTE = 3;

describe('a revoked key gets its own 401 every time (CONTRACT §4)', () => {
  const namespace = uniqueNamespace('revoked');
  const clock = new ManualClock(MID_MINUTE);
  let a: ProductHarness;
  let b: ProductHarness;

  beforeAll(async () => {
    const overrides = { anonymous: { perMinute: ANONYMOUS_PER_MINUTE } };
    a = await startTestProduct({ namespace, clock, overrides });
    b = await startTestProduct({ namespace, clock, overrides });
  });

  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('after the address has used up the anonymous limit with bad keys, the revoked key still learns it was revoked', async () => {
    const { id, auth } = await createKey(a, { plan: 'free' });
    await admin(a).delete(`/admin/keys/${id}`).expect(204);
    const badKeys = await sequentially(ANONYMOUS_PER_MINUTE + 2, (i) =>
      request(a.gatewayUrl)
        .get('/v1/pets')
        .set('Authorization', `Bearer asg_dev_${String(i).padStart(32, '0')}`),
    );
    // Unknown keys count against the address's anonymous limit…
    expect(badKeys.map((res) => res.status)).toEqual([401, 401, 401, 429, 429]);

    for (const res of await sequentially(5, () => request(a.gatewayUrl).get('/v1/pets').set('Authorization', auth))) {
      expectError(res, 401, 'revoked_api_key');
      expect(header(res, 'www-authenticate')).toBe(
        'Bearer realm="animal-store", error="invalid_token", error_description="This API key has been revoked."',
      );
      // The address's window is shown, not consumed: it stays used up, with no Retry-After on a 401.
      expect(expectRateLimitHeaders(res).remaining).toBe(0);
      expect(header(res, 'retry-after')).toBeUndefined();
    }
  });

  it('on a second instance too, and a revoked key never uses up the anonymous limit itself', async () => {
    const { id, auth } = await createKey(a, { plan: 'free' });
    // B has the key in its cache when A revokes it.
    expect(
      (await request(b.gatewayUrl).get('/v1/pets').set('Authorization', auth).set('X-Forwarded-For', '10.9.9.9'))
        .status,
    ).toBe(200);
    await admin(a).delete(`/admin/keys/${id}`).expect(204);
    await eventually(
      async () => (await request(b.gatewayUrl).get('/v1/pets').set('Authorization', auth)).status === 401,
      { timeoutMs: 1000 },
    );
    for (const res of await sequentially(ANONYMOUS_PER_MINUTE * 3, () =>
      request(b.gatewayUrl).get('/v1/pets').set('Authorization', auth),
    )) {
      expectError(res, 401, 'revoked_api_key');
    }
  });
});

describe('WWW-Authenticate on every 401 (RFC 9110 §11.6.1, RFC 6750 §3)', () => {
  let product: ProductHarness;

  beforeAll(async () => {
    product = await startTestProduct({
      overrides: { anonymous: { perMinute: 1000 }, admin: { failedTokensPerMinute: 1000 } },
    });
  });

  afterAll(async () => {
    await product?.close();
  });

  const challengeFor = async (authorization?: string) => {
    const req = request(product.gatewayUrl).get('/v1/pets');
    const res = await (authorization === undefined ? req : req.set('Authorization', authorization));
    expect(res.status).toBe(401);
    return header(res, 'www-authenticate');
  };

  it('no key: the realm alone', async () => {
    expect(await challengeFor()).toBe('Bearer realm="animal-store"');
  });

  it('a bearer key that is refused: invalid_token with a description', async () => {
    expect(await challengeFor('Bearer asg_dev_00000000000000000000000000000000')).toBe(
      'Bearer realm="animal-store", error="invalid_token", error_description="The API key is not valid for this environment."',
    );
    expect(await challengeFor('Bearer asg_live_00000000000000000000000000000000')).toMatch(
      /^Bearer realm="animal-store", error="invalid_token", /,
    );
  });

  it('another scheme, or a bare key: the realm alone (no bearer token was sent)', async () => {
    expect(await challengeFor('Basic dXNlcjpwYXNz')).toBe('Bearer realm="animal-store"');
    expect(await challengeFor('asg_dev_00000000000000000000000000000000')).toBe('Bearer realm="animal-store"');
  });

  it('two Authorization headers: invalid_request', async () => {
    const { key } = await createKey(product, { plan: 'free' });
    const exchange = await sendRaw(product.gatewayUrl, {
      method: 'GET',
      target: '/v1/pets',
      headers: [
        ['Authorization', `Bearer ${key}`],
        ['Authorization', `Bearer ${key}`],
      ],
    });
    expect(exchange.response?.status).toBe(401);
    expect(exchange.response?.headers['www-authenticate']).toEqual([
      'Bearer realm="animal-store", error="invalid_request", error_description="Send exactly one Authorization header."',
    ]);
  });

  it('the admin API challenges with its own realm', async () => {
    const missing = await request(product.adminUrl).get('/admin/keys');
    expectError(missing, 401, 'missing_api_key');
    expect(header(missing, 'www-authenticate')).toBe('Bearer realm="animal-store-admin"');
    const wrong = await request(product.adminUrl).get('/admin/keys').set('Authorization', 'Bearer wrong');
    expectError(wrong, 401, 'invalid_api_key');
    expect(header(wrong, 'www-authenticate')).toMatch(/^Bearer realm="animal-store-admin", error="invalid_token"/);
  });
});

describe('failed admin tokens: slowed, counted, logged, locked out', () => {
  let product: ProductHarness;
  const PER_ADDRESS = 4;
  const TOTAL = 10;

  beforeAll(async () => {
    product = await startTestProduct({
      overrides: { admin: { failedTokensPerMinute: PER_ADDRESS, failedTokensPerMinuteTotal: TOTAL } },
    });
  });

  afterAll(async () => {
    await product?.close();
  });

  /** GET /admin/keys from a chosen loopback address (any 127.x.y.z works), with `token` or without one. */
  function adminGetFrom(
    localAddress: string,
    token?: string,
  ): Promise<{ status: number; code?: string; retryAfter?: string; ms: number }> {
    const url = new URL('/admin/keys', product.adminUrl);
    const started = performance.now();
    return new Promise((resolve, reject) => {
      const req = http.get(
        url,
        { localAddress, agent: false, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } },
        (res) => {
          let body = '';
          res.on('data', (chunk: Buffer) => (body += chunk.toString()));
          res.on('end', () => {
            const code = res.statusCode === 200 ? undefined : (JSON.parse(body) as { code: string }).code;
            resolve({
              status: res.statusCode ?? 0,
              code,
              retryAfter: res.headers['retry-after'],
              ms: performance.now() - started,
            });
          });
        },
      );
      req.on('error', reject);
    });
  }

  it('a wrong token is answered no sooner than 250 ms, a right one at once', async () => {
    const started = performance.now();
    await request(product.adminUrl).get('/admin/keys').set('Authorization', 'Bearer wrong-token').expect(401);
    expect(performance.now() - started).toBeGreaterThanOrEqual(245);
    await request(product.adminUrl).get('/admin/keys').set('Authorization', `Bearer ${product.adminToken}`).expect(200);
  });

  it('past the limit an address gets 429 for wrong tokens, with Retry-After; the right token from it is still served; each refusal counted and logged with the address', async () => {
    const wrong = await sequentially(3, () =>
      request(product.adminUrl).get('/admin/keys').set('Authorization', 'Bearer still-wrong'),
    );
    expect(wrong.map((res) => res.status)).toEqual([401, 401, 401]);
    const locked = await request(product.adminUrl).get('/admin/keys').set('Authorization', 'Bearer wrong-again');
    expectError(locked, 429, 'rate_limited');
    expect(Number(header(locked, 'retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(header(locked, 'retry-after'))).toBeLessThanOrEqual(60);
    // Issue 42: a local user sending wrong tokens could lock the operator out. The right token is never refused.
    await request(product.adminUrl).get('/admin/keys').set('Authorization', `Bearer ${product.adminToken}`).expect(200);

    const metrics = (await request(product.adminUrl).get('/metrics').expect(200)).text;
    expect(metrics).toMatch(/^gateway_admin_auth_failures_total\{reason="invalid"\} 4$/m);
    expect(metrics).toMatch(/^gateway_admin_auth_failures_total\{reason="locked_out"\} 1$/m);
    const refusals = logLines(product).filter((entry) => entry.msg === 'admin token refused');
    expect(refusals).toHaveLength(4);
    for (const entry of refusals)
      expect(entry).toEqual(expect.objectContaining({ reason: 'invalid', clientAddress: '127.0.0.1' }));
    expect(product.logs.text()).not.toContain(product.adminToken);
  });

  it('rotating addresses (127.0.0.0/8) does not get around it: past the bound over all addresses every wrong token gets 429 at once, and the right token is still served from any address', async () => {
    // 4 failures so far, all from 127.0.0.1; 6 more from new addresses reach the bound of 10.
    const fresh = (i: number) => `127.0.${42}.${i}`;
    const before = await Promise.all(
      Array.from({ length: TOTAL - PER_ADDRESS }, (_, i) => adminGetFrom(fresh(i), `guess-${i}`)),
    );
    expect(before.map((a) => a.status)).toEqual(Array(TOTAL - PER_ADDRESS).fill(401));
    // Beside each wrong token, the right one from another fresh address: answered at once, so the pair
    // meets the same machine (a crowded one took 830 ms for either), and only the delay tells them apart.
    const batch = await Promise.all(
      Array.from({ length: 20 }, (_, i) => [
        adminGetFrom(fresh(100 + i), `guess-${100 + i}`),
        adminGetFrom(fresh(200 + i), product.adminToken),
      ]).flat(),
    );
    const after = batch.filter((_, i) => i % 2 === 0);
    const served = batch.filter((_, i) => i % 2 === 1);
    expect(after.map((a) => `${a.status} ${a.code}`)).toEqual(Array(20).fill('429 rate_limited'));
    expect(served.map((a) => a.status)).toEqual(Array(20).fill(200));
    // Answered at once: the 250 ms a refusal costs is not spent (nor a socket held) for the flood:
    // no later than the right token's answers, give or take half that delay.
    const median = (values: number[]) => [...values].sort((x, y) => x - y)[values.length >> 1]!;
    expect(median(after.map((a) => a.ms))).toBeLessThan(median(served.map((a) => a.ms)) + FAILED_TOKEN_DELAY_MS / 2);
    expect((await adminGetFrom('127.0.43.1', product.adminToken)).status).toBe(200);
    expect((await adminGetFrom('127.0.0.1', product.adminToken)).status).toBe(200);
    // One line says the lockout over all addresses started, rather than one per refusal.
    const lines = logLines(product);
    expect(lines.filter((entry) => entry.msg === 'admin token refused')).toHaveLength(TOTAL);
    expect(
      lines.filter(
        (entry) => typeof entry.msg === 'string' && entry.msg.startsWith('wrong admin tokens from all addresses'),
      ),
    ).toHaveLength(1);
  });
});

describe('CORS (CONTRACT §3)', () => {
  const APP = 'https://app.example';
  let upstream: TestUpstream;
  let product: ProductHarness;
  let plain: ProductHarness;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    product = await startTestProduct({
      overrides: {
        upstream: { url: upstream.url },
        anonymous: { perMinute: 50 },
        cors: { allowedOrigins: [APP], maxAgeSeconds: 600 },
      },
    });
    plain = await startTestProduct({ overrides: { upstream: { url: upstream.url } } });
  });

  afterAll(async () => {
    await plain?.close();
    await product?.close();
    await upstream?.close();
  });

  const preflight = (target: ProductHarness, origin: string, path = '/v1/pets') =>
    request(target.gatewayUrl)
      .options(path)
      .set('Origin', origin)
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'authorization, content-type');

  it('a preflight from a listed origin: 204 from the gateway, no key, no limit counted, nothing forwarded', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await preflight(product, APP);
      expect(res.status).toBe(204);
      expect(header(res, 'access-control-allow-origin')).toBe(APP);
      expect(header(res, 'access-control-allow-methods')).toBe('GET, HEAD, POST');
      expect(header(res, 'access-control-allow-headers')).toMatch(/Authorization, Content-Type/);
      expect(header(res, 'access-control-max-age')).toBe('600');
      expect(header(res, 'vary')).toBe('Origin');
      expect(header(res, 'x-request-id')).toBeDefined();
      expect(header(res, 'x-ratelimit-limit')).toBeUndefined();
    }
    const item = await preflight(product, APP, '/v1/pets/7');
    expect(item.status).toBe(204);
    expect(header(item, 'access-control-allow-methods')).toBe('GET, HEAD');
    expect(upstream.requests).toHaveLength(0);
    // Six preflights later the address still has its whole anonymous window of 50.
    const first = await request(product.gatewayUrl).get('/v1/pets');
    expectError(first, 401, 'missing_api_key');
    expect(expectRateLimitHeaders(first).remaining).toBe(49);
  });

  it('responses to a listed origin expose the rate-limit, Retry-After, deprecation, Link and request-id headers', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const res = await request(product.gatewayUrl).get('/v1/pets').set('Origin', APP).set('Authorization', auth);
    expect(res.status).toBe(200);
    expect(header(res, 'access-control-allow-origin')).toBe(APP);
    const exposed = header(res, 'access-control-expose-headers')!.split(', ');
    for (const name of [
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
      'RateLimit-Policy',
      'RateLimit',
      'Retry-After',
      'Deprecation',
      'Sunset',
      'Link',
      'X-Request-Id',
    ]) {
      expect(exposed).toContain(name);
    }
    // Errors carry them too: browser code must be able to read why it was refused.
    const refused = await request(product.gatewayUrl).get('/v1/pets').set('Origin', APP);
    expect(refused.status).toBe(401);
    expect(header(refused, 'access-control-allow-origin')).toBe(APP);
  });

  it('other origins get no CORS headers, and their preflight is an ordinary request (a key is needed)', async () => {
    const other = await request(product.gatewayUrl).get('/v1/pets').set('Origin', 'https://evil.example');
    expect(Object.keys(other.headers).filter((name) => name.startsWith('access-control-'))).toEqual([]);
    const otherPreflight = await preflight(product, 'https://evil.example');
    expect(otherPreflight.status).toBe(401);
    expect(Object.keys(otherPreflight.headers).filter((name) => name.startsWith('access-control-'))).toEqual([]);
  });

  it('off by default: no CORS headers for anyone, OPTIONS is not answered as a preflight', async () => {
    const res = await preflight(plain, APP);
    expect(res.status).toBe(401);
    expect(Object.keys(res.headers).filter((name) => name.startsWith('access-control-'))).toEqual([]);
  });
});

describe('the listener bounds slow and numerous clients (config server.*)', () => {
  let product: ProductHarness;
  let upstream: TestUpstream;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    product = await startTestProduct({
      overrides: {
        upstream: { url: upstream.url },
        server: { headersTimeoutMs: 1000, requestTimeoutMs: 2000, maxConnections: 20 },
        anonymous: { perMinute: 1000 },
      },
    });
  });

  afterAll(async () => {
    await product?.close();
    await upstream?.close();
  });

  /** Opens a connection; resolves once it is established. */
  function connect(): Promise<net.Socket> {
    const url = new URL(product.gatewayUrl);
    return new Promise((resolve, reject) => {
      const socket = net.connect(Number(url.port), url.hostname, () => resolve(socket));
      socket.once('error', reject);
    });
  }

  function closed(socket: net.Socket): Promise<{ bytes: string }> {
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', () => undefined);
    return new Promise((resolve) =>
      socket.once('close', () => resolve({ bytes: Buffer.concat(received).toString('latin1') })),
    );
  }

  it('a client trickling its headers is cut off after headersTimeout, while others are served meanwhile', async () => {
    const { auth } = await createKey(product, { plan: 'pro' });
    const slow = await connect();
    const slowClosed = closed(slow);
    slow.write('GET /v1/pets HTTP/1.1\r\nHost: gateway\r\n');
    const started = Date.now();
    const trickle = setInterval(() => {
      if (!slow.destroyed) slow.write('X-Slow: a\r\n');
    }, 200);
    try {
      const served = await sequentially(5, () =>
        request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth),
      );
      expect(served.map((res) => res.status)).toEqual([200, 200, 200, 200, 200]);
      const { bytes } = await slowClosed;
      // Closed without an answer (the client is slow or gone; nginx does the same), within the
      // 1 s header budget plus node's 1 s check interval, with slack for a loaded machine.
      expect(bytes).toBe('');
      expect(Date.now() - started).toBeLessThan(6000);
    } finally {
      clearInterval(trickle);
    }
    const log = logLines(product).find((entry) => entry.msg === 'request timed out before it arrived');
    expect(log).toEqual(expect.objectContaining({ reason: 'ERR_HTTP_REQUEST_TIMEOUT', clientAddress: '127.0.0.1' }));
  });

  it('past maxConnections a new connection is closed at once; a freed slot serves again', async () => {
    const held = await Promise.all(Array.from({ length: 20 }, () => connect()));
    try {
      const extra = await connect();
      expect((await closed(extra)).bytes).toBe('');
    } finally {
      for (const socket of held) socket.destroy();
    }
    await eventually(
      async () => {
        try {
          return (await request(product.gatewayUrl).get('/v1/pets')).status === 401;
        } catch {
          return false; // node may not have counted the freed slots yet: the connection is closed again
        }
      },
      { timeoutMs: 3000 },
    );
  });
});

describe('the admin listener is on loopback unless ADMIN_HOST says otherwise', () => {
  let product: ProductHarness;

  beforeAll(async () => {
    product = await startTestProduct({ overrides: { server: { host: '0.0.0.0' } } });
  });

  afterAll(async () => {
    await product?.close();
  });

  const reachable = (host: string, port: number) =>
    new Promise<boolean>((resolve) => {
      const socket = net.connect(port, host, () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });

  it('the public listener answers on another local address; the admin listener only on 127.0.0.1', async () => {
    const gatewayPort = Number(new URL(product.gatewayUrl).port);
    const adminPort = Number(new URL(product.adminUrl).port);
    expect(new URL(product.adminUrl).hostname).toBe('127.0.0.1');
    expect(await reachable('127.0.0.2', gatewayPort)).toBe(true);
    expect(await reachable('127.0.0.1', adminPort)).toBe(true);
    expect(await reachable('127.0.0.2', adminPort)).toBe(false);
  });
});
