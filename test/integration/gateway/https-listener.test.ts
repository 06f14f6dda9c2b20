import fs from 'node:fs';
import http2 from 'node:http2';
import tls from 'node:tls';
import request from 'supertest';
import { makeTestCertificates, type TestCertificates } from '../../support/tls-certs';
import { TlsClient, type Protocol, type TlsAnswer } from '../../support/tls-client';
import { startRecordingUpstream, startTestProduct, type ProductHarness, type TestUpstream } from './gateway-kit';
import { eventuallyLogLine } from '../../support/log-lines';
import { scrape, total } from './listener-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/**
 * CONTRACT §2: with TLS_CERT_FILE and TLS_KEY_FILE set, the public listener speaks HTTPS and offers
 * HTTP/2 and HTTP/1.1 by ALPN, and every behaviour of the contract holds over both.
 */
let certs: TestCertificates;
beforeAll(() => {
  certs = makeTestCertificates();
});

const tlsEnv = () => ({ TLS_CERT_FILE: certs.serverCert, TLS_KEY_FILE: certs.serverKey });
const ORIGIN = 'https://app.example';

function expectRequestId(res: TlsAnswer): string {
  const id = res.headers['x-request-id'];
  expect(id).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
  return id as string;
}

describe.each<Protocol>(['h2', 'http/1.1'])('the contract over HTTPS, %s', (protocol) => {
  let product: ProductHarness;
  let client: TlsClient;

  beforeAll(async () => {
    product = await startTestProduct({
      env: tlsEnv(),
      overrides: {
        plans: { tiny: { perMinute: 2, perDay: 100 } },
        ban: { threshold: 2, windowSeconds: 60, durationSeconds: 60 },
        cors: { allowedOrigins: [ORIGIN] },
      },
    });
    client = new TlsClient(product.gatewayUrl, certs.caCert, protocol);
  });
  afterAll(async () => {
    client.close();
    await product.close();
  });

  it('is served over HTTPS with the protocol ALPN chose', async () => {
    expect(product.gatewayUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const res = await client.request({ path: '/v1/pets' });
    expect(res.protocol).toBe(protocol);
  });

  it('401 with WWW-Authenticate, X-Request-Id and CORS headers when no key is sent', async () => {
    const res = await client.request({ path: '/v1/pets', headers: { origin: ORIGIN } });
    expectError(res, 401, 'missing_api_key');
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
    expectRequestId(res);
  });

  it('echoes a client request id and answers a key with the rate-limit headers and the inventory body', async () => {
    const { auth } = await createKey(product, { plan: 'pro' });
    const res = await client.request({
      path: '/v1/pets',
      headers: { authorization: auth, 'x-request-id': 'req-tls-0001' },
    });
    expect(res.status).toBe(200);
    expect(Array.isArray((res.body as { data?: unknown }).data ?? res.body)).toBe(true);
    expect(res.headers['x-request-id']).toBe('req-tls-0001');
    for (const name of [
      'x-ratelimit-limit',
      'x-ratelimit-remaining',
      'x-ratelimit-reset',
      'ratelimit-policy',
      'ratelimit',
    ])
      expect(res.headers[name]).toEqual(expect.any(String));
  });

  it('announces the deprecation of GET /v1/pets/{petId}', async () => {
    const { auth } = await createKey(product, { plan: 'pro' });
    const res = await client.request({ path: '/v1/pets/1', headers: { authorization: auth } });
    expect(res.headers.deprecation).toMatch(/^@\d+$/);
    expect(res.headers.sunset).toBe('Thu, 05 Dec 2030 00:00:00 GMT');
  });

  it('refuses a body over the limit with 413 and keeps serving', async () => {
    const { auth } = await createKey(product, { plan: 'pro' });
    const big = 'x'.repeat(product.config.server.maxBodyBytes + 1);
    const res = await client.request({
      method: 'POST',
      path: '/v1/pets',
      headers: { authorization: auth, 'content-type': 'application/json', 'content-length': String(big.length) },
      body: big,
    });
    expectError(res, 413, 'payload_too_large');
    expect((await client.request({ path: '/v1/pets', headers: { authorization: auth } })).status).toBe(200);
  });

  it('limits, then bans, with Retry-After', async () => {
    const { auth } = await createKey(product, { plan: 'tiny' });
    const answers: TlsAnswer[] = [];
    for (let i = 0; i < 8; i++)
      answers.push(await client.request({ path: '/v1/pets', headers: { authorization: auth } }));
    expect(answers.slice(0, 2).map((a) => a.status)).toEqual([200, 200]);
    expectError(answers[2]!, 429, 'rate_limited');
    expect(Number(answers[2]!.headers['retry-after'])).toBeGreaterThan(0);
    expectError(answers.at(-1)!, 429, 'temporarily_banned');
  });

  it('answers an unknown route 404 and a wrong key 401', async () => {
    const { auth } = await createKey(product, { plan: 'pro' });
    expectError(await client.request({ path: '/v1/nothing-here', headers: { authorization: auth } }), 404, 'not_found');
    expectError(
      await client.request({ path: '/v1/pets', headers: { authorization: 'Bearer asg_test_wrong' } }),
      401,
      'invalid_api_key',
    );
  });

  it('logs each request with its protocol and counts it in the metrics', async () => {
    const res = await client.request({ path: '/v1/pets', headers: { 'x-request-id': 'req-tls-logged' } });
    expect(res.status).toBe(401);
    const line = await eventuallyLogLine(product, { msg: 'request', requestId: 'req-tls-logged' });
    expect(line).toMatchObject({ msg: 'request', protocol, status: 401, route: '/v1/pets' });
    expect(
      total(await scrape(product, 'gateway_http_requests_total'), { route: '/v1/pets', status_code: '401' }),
    ).toBeGreaterThan(0);
  });
});

describe.each(['undici', 'http-proxy'] as const)('forwarding HTTP/2 requests with the %s forwarder', (forwarder) => {
  let product: ProductHarness;
  let upstream: TestUpstream;
  let client: TlsClient;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    product = await startTestProduct({ env: tlsEnv(), overrides: { upstream: { url: upstream.url, forwarder } } });
    client = new TlsClient(product.gatewayUrl, certs.caCert, 'h2');
  });
  afterAll(async () => {
    client.close();
    await product.close();
    await upstream.close();
  });

  it('reaches the inventory over HTTP/1.1 with no pseudo-header or connection-specific header, and streams a body up', async () => {
    const { auth } = await createKey(product, { plan: 'pro' });
    const body = JSON.stringify({ name: 'Rex', species: 'dog' });
    const res = await client.request({
      method: 'POST',
      path: '/v1/pets',
      headers: { authorization: auth, 'content-type': 'application/json', te: 'trailers', 'x-custom': 'kept' },
      body,
    });
    expect(res.status).toBe(200);
    const seen = upstream.requests.at(-1)!;
    expect(seen).toMatchObject({ method: 'POST', url: '/v1/pets', body });
    expect(Object.keys(seen.headers).filter((name) => name.startsWith(':'))).toEqual([]);
    for (const name of ['te', 'upgrade', 'keep-alive', 'proxy-connection', 'authorization'])
      expect(seen.headers[name]).toBeUndefined();
    // The gateway's own connection to the inventory: HTTP/1.1, kept alive.
    expect([undefined, 'keep-alive']).toContain(seen.headers.connection);
    // The body had no declared length: the gateway's own HTTP/1.1 client frames it (chunked) or with Content-Length.
    expect(
      seen.headers['transfer-encoding'] === 'chunked' || seen.headers['content-length'] === String(body.length),
    ).toBe(true);
    expect(seen.headers['x-custom']).toBe('kept');
    expect(seen.headers.host).toEqual(expect.any(String));
    expect(seen.headers['x-forwarded-host']).toBe(new URL(product.gatewayUrl).host);
  });

  it('refuses an HTTP/2 body of no declared length once it passes the limit', async () => {
    const { auth } = await createKey(product, { plan: 'pro' });
    const res = await client.request({
      method: 'POST',
      path: '/v1/pets',
      headers: { authorization: auth, 'content-type': 'application/json' },
      body: 'x'.repeat(product.config.server.maxBodyBytes * 2),
    });
    expectError(res, 413, 'payload_too_large');
  });

  it('serves many concurrent streams of one session over a few keep-alive upstream connections', async () => {
    const { auth } = await createKey(product, { plan: 'pro' });
    const answers = await Promise.all(
      Array.from({ length: 40 }, () => client.request({ path: '/v1/pets', headers: { authorization: auth } })),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(answers.every((a) => a.headers['connection'] === undefined && a.headers['keep-alive'] === undefined)).toBe(
      true,
    );
  });
});

describe('HTTP/2 limits', () => {
  let product: ProductHarness;
  let client: TlsClient;

  beforeAll(async () => {
    product = await startTestProduct({
      env: tlsEnv(),
      overrides: { http2: { maxConcurrentStreams: 16, maxHeaderListPairs: 32 } },
    });
    client = new TlsClient(product.gatewayUrl, certs.caCert, 'h2');
  });
  afterAll(async () => {
    client.close();
    await product.close();
  });

  it('announces the stream limit in its SETTINGS', async () => {
    const session = client.h2Session();
    await new Promise<void>((resolve) =>
      session.remoteSettings.maxConcurrentStreams !== undefined && session.connecting === false
        ? resolve()
        : session.once('remoteSettings', () => resolve()),
    );
    expect(session.remoteSettings.maxConcurrentStreams).toBe(16);
  });

  it('refuses a request with more header fields than allowed, and the session keeps serving', async () => {
    const many: Record<string, string> = {};
    for (let i = 0; i < 40; i++) many[`x-extra-${i}`] = 'v';
    const outcome = await client.request({ path: '/v1/pets', headers: many }).then(
      (res) => `status ${res.status}`,
      (err: NodeJS.ErrnoException) => err.code,
    );
    expect(outcome).not.toBe('status 401');
    expect((await client.request({ path: '/v1/pets' })).status).toBe(401);
  });

  it('keeps the HTTP/1.1 bounds on HTTPS/1.1: a header section over maxHeaderBytes is refused', async () => {
    const http1 = new TlsClient(product.gatewayUrl, certs.caCert, 'http/1.1');
    try {
      const res = await http1.request({
        path: '/v1/pets',
        headers: { 'x-big': 'y'.repeat(product.config.server.maxHeaderBytes + 10) },
      });
      expect(res.status).toBe(431);
    } finally {
      http1.close();
    }
  });
});

/**
 * Issue 42, CONTRACT §2 (TLS_CERT_FILE): over HTTP/2 every request gets the Error body and
 * X-Request-Id, CONNECT included (Node answered it a bare 405 of its own), and a `host` that
 * differs from `:authority` is a malformed request (RFC 9113 §8.3.1), not served.
 */
describe('HTTP/2 requests Node would answer, or serve, without the gateway', () => {
  let product: ProductHarness;
  let client: TlsClient;

  beforeAll(async () => {
    product = await startTestProduct({ redis: false, env: tlsEnv() });
    client = new TlsClient(product.gatewayUrl, certs.caCert, 'h2');
  });
  afterAll(async () => {
    client.close();
    await product.close();
  });

  function h2(headers: http2.OutgoingHttpHeaders): Promise<TlsAnswer> {
    return new Promise((resolve, reject) => {
      const stream = client.h2Session().request(headers);
      const chunks: Buffer[] = [];
      let response: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader = {};
      stream.on('response', (h) => (response = h));
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', reject);
      stream.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const { ':status': status, ...rest } = response;
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ status: status ?? 0, headers: rest, text, body, protocol: 'h2' });
      });
      stream.end();
    });
  }

  it('CONNECT: 405 method_not_allowed with the Error body and X-Request-Id, logged and counted', async () => {
    const res = await h2({ ':method': 'CONNECT', ':authority': 'db.internal:5432', 'x-request-id': 'req-h2-connect' });
    expectError(res, 405, 'method_not_allowed');
    expect(res.headers['x-request-id']).toBe('req-h2-connect');
    const line = await eventuallyLogLine(product, { msg: 'request', requestId: 'req-h2-connect' });
    expect(line).toMatchObject({ msg: 'request', status: 405 });
    // The session goes on serving.
    expect((await client.request({ path: '/v1/pets' })).status).toBe(401);
  });

  it('a host that differs from :authority: 400 malformed_request with the Error body and X-Request-Id, never forwarded', async () => {
    const { auth } = await createKey(product, { plan: 'pro' });
    const url = new URL(product.gatewayUrl);
    for (const host of ['evil.example', `${url.hostname}:1`, 'localhost']) {
      const res = await h2({
        ':method': 'GET',
        ':path': '/v1/pets',
        ':authority': url.host,
        authorization: auth,
        host,
      });
      expectError(res, 400, 'malformed_request');
      expectRequestId(res);
    }
    // The same authority in either spelling of case is the same entity: served.
    const same = await h2({
      ':method': 'GET',
      ':path': '/v1/pets',
      ':authority': url.host,
      authorization: auth,
      host: url.host.toUpperCase(),
    });
    expect(same.status).toBe(200);
    expect((await client.request({ path: '/v1/pets', headers: { authorization: auth } })).status).toBe(200);
  });
});

describe('HTTPS/1.1 slow clients', () => {
  it('a client that never finishes its headers is cut off after server.headersTimeoutMs', async () => {
    const product = await startTestProduct({
      env: tlsEnv(),
      overrides: { server: { headersTimeoutMs: 1000, requestTimeoutMs: 2000 } },
    });
    try {
      const { port } = new URL(product.gatewayUrl);
      const socket = tls.connect({
        host: '127.0.0.1',
        port: Number(port),
        ca: fs.readFileSync(certs.caCert),
        ALPNProtocols: ['http/1.1'],
      });
      await new Promise((resolve) => socket.once('secureConnect', resolve));
      const started = Date.now();
      socket.write('GET /v1/pets HTTP/1.1\r\nHost: x\r\n');
      let answer = '';
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString('utf8')));
      await new Promise((resolve) => socket.once('close', resolve));
      const waitedMs = Date.now() - started;
      expect(waitedMs).toBeGreaterThanOrEqual(900);
      expect(waitedMs).toBeLessThan(4000);
      expect(answer === '' || /^HTTP\/1\.1 408/.test(answer)).toBe(true);
    } finally {
      await product.close();
    }
  });
});

describe('startup with a bad pair', () => {
  it('stops with one line naming TLS_KEY_FILE when the key is not the certificate’s', async () => {
    await expect(
      startTestProduct({ env: { TLS_CERT_FILE: certs.serverCert, TLS_KEY_FILE: certs.clientKey } }),
    ).rejects.toThrow(/^invalid setting TLS_KEY_FILE \(tls\.keyFile\): .* is not the key of the certificate in /);
  });

  it('stops naming TLS_CERT_FILE when it is not a certificate, and refuses one file without the other', async () => {
    await expect(
      startTestProduct({ env: { TLS_CERT_FILE: certs.serverKey, TLS_KEY_FILE: certs.serverKey } }),
    ).rejects.toThrow(/^invalid setting TLS_CERT_FILE \(tls\.certFile\): .* holds no PEM certificate$/);
    await expect(startTestProduct({ env: { TLS_CERT_FILE: certs.serverCert } })).rejects.toThrow(
      /TLS_KEY_FILE \(tls\.keyFile\): HTTPS needs both/,
    );
    await expect(
      startTestProduct({ env: { TLS_CERT_FILE: '/nonexistent/cert.pem', TLS_KEY_FILE: certs.serverKey } }),
    ).rejects.toThrow(/invalid setting TLS_CERT_FILE \(tls\.certFile\): must name a readable file/);
  });
});

// Keeps the admin listener plain HTTP: only the public listener takes TLS.
describe('the admin listener', () => {
  it('stays plain HTTP beside an HTTPS gateway', async () => {
    const product = await startTestProduct({ env: tlsEnv() });
    try {
      expect(product.adminUrl).toMatch(/^http:\/\//);
      await request(product.adminUrl).get('/healthz').expect(200);
    } finally {
      await product.close();
    }
  });
});

export { http2 };
