import http from 'node:http';
import http2 from 'node:http2';
import fs from 'node:fs';
import tls from 'node:tls';
import { makeTestCertificates, type TestCertificates } from '../../support/tls-certs';
import { TlsClient } from '../../support/tls-client';
import { startTestProduct, type ProductHarness } from '../gateway/gateway-kit';
import { seriesOf, type Series } from './series';
import { createKey } from '../../support/keys';

/**
 * Issue 42, high 4: over HTTP/2 any token was accepted as `:method` and became a label value of
 * gateway_http_requests_total and the duration histogram: 30,000 requests made 541,080 series, a
 * remote way to run the gateway out of memory. CONTRACT §6: every label has a closed set of values;
 * nothing a client sends creates a series.
 *
 * The test sends every kind of value a client controls (methods, paths, query strings, protocols,
 * header names and values, keys, authorities), over HTTP/2 and HTTP/1.1 on the public listener,
 * straight to the embedded inventory's listener and to the admin listener, in two rounds: a
 * warm-up with two values of each kind, which may create the series of the closed sets (`other`
 * included), then many other values of each kind, 5,000 distinct HTTP/2 methods among them.
 * The second round must add no series at all, to any metric of the scrape.
 */
jest.setTimeout(180_000);

let certs: TestCertificates;
let product: ProductHarness;
let auth: string;

beforeAll(async () => {
  certs = makeTestCertificates();
  product = await startTestProduct({
    redis: false,
    env: { TLS_CERT_FILE: certs.serverCert, TLS_KEY_FILE: certs.serverKey },
    // Wide limits: every request reaches the step that answers it, none is cut short by a 429.
    // A 30 s upstream timeout: the premise is an inventory that answers; with the default, a crowded
    // machine (load 20-27) made some answers 504s, whose series are new and not a client's doing.
    overrides: {
      anonymous: { perMinute: 10_000_000 },
      plans: { wide: { perMinute: 10_000_000, perDay: 100_000_000 } },
      upstream: { timeoutMs: 30_000 },
    },
  });
  auth = (await createKey(product, { plan: 'wide' })).auth;
});
afterAll(async () => {
  await product?.close();
});

/** A distinct method token per round and index: letters only, as RFC 9110's token allows. */
const methodToken = (round: string, i: number) => `X${round}${i.toString(36).toUpperCase()}`;

/** One HTTP/2 request with the headers exactly as given (pseudo-headers included); resolves with its status, 0 for a reset stream. */
function h2Request(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body?: string,
): Promise<number> {
  return new Promise((resolve) => {
    const stream = session.request(headers, { endStream: body === undefined });
    let status = 0;
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.on('error', () => resolve(0));
    stream.on('close', () => resolve(status));
    stream.resume();
    if (body !== undefined) stream.end(body);
  });
}

function h2Session(): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(product.gatewayUrl, {
      ca: fs.readFileSync(certs.caCert),
      peerMaxConcurrentStreams: 1000,
    });
    session.on('error', () => undefined);
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

/** Runs `send` for 0..count-1, at most `parallel` at once. */
async function inBatches(count: number, parallel: number, send: (i: number) => Promise<unknown>): Promise<void> {
  for (let start = 0; start < count; start += parallel) {
    await Promise.all(Array.from({ length: Math.min(parallel, count - start) }, (_, j) => send(start + j)));
  }
}

/** Raw bytes over TLS with ALPN http/1.1: request lines an ordinary client would refuse to write. Resolves when the server closes. */
function rawTls(bytes: string): Promise<string> {
  const url = new URL(product.gatewayUrl);
  return new Promise((resolve) => {
    const socket = tls.connect(
      { host: url.hostname, port: Number(url.port), ca: fs.readFileSync(certs.caCert), ALPNProtocols: ['http/1.1'] },
      () => socket.end(bytes),
    );
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(received));
    socket.setTimeout(10_000, () => socket.destroy());
  });
}

/** A plain HTTP/1.1 request to `baseUrl` (the inventory's or the admin listener). */
function plainRequest(
  baseUrl: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(new URL(path, baseUrl), { method, headers, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

/** HTTP/1.1 methods Node's parser knows, without the ones the routes serve: each reaches the handler. */
const PARSED_METHODS = http.METHODS.filter(
  (m) => !['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT'].includes(m),
);

/**
 * One round of client-controlled values. `round` makes every value of this round new; `n` is how
 * many values of each kind; `methods` how many distinct HTTP/2 methods.
 */
async function sendRound(round: string, n: number, methods: number): Promise<void> {
  const session = await h2Session();
  const key = { authorization: auth };
  try {
    // HTTP/2: any token as :method, with a key and without, on every route and none.
    await inBatches(methods, 100, (i) => {
      const path = ['/v1/pets', '/v1/pets/7', '/v1/usage', '/v1/nothing', '/elsewhere'][i % 5]!;
      return h2Request(session, { ':method': methodToken(round, i), ':path': path, ...(i % 2 === 0 ? key : {}) });
    });
    // HTTP/2: the methods HTTP defines, every route, with and without a key.
    for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE']) {
      for (const path of ['/v1/pets', '/v1/pets/7', '/v1/usage', '/v1/nothing', '/elsewhere']) {
        await h2Request(session, { ':method': method, ':path': path, ...key });
        await h2Request(session, { ':method': method, ':path': path });
      }
    }
    await inBatches(n, 50, async (i) => {
      const v = `${round}${i}`;
      await Promise.all([
        // Paths and query strings.
        h2Request(session, { ':path': `/v1/pets/${v}`, ...key }),
        h2Request(session, { ':path': `/v1/${v}/x`, ...key }),
        h2Request(session, { ':path': `/${v}`, ...key }),
        h2Request(session, { ':path': `/v1/pets?limit=${i % 100}&status=${v}&cursor=${v}`, ...key }),
        h2Request(session, { ':path': `/v1/pets/%2e%2e/${v}`, ...key }),
        // Header names and values, keys of every shape, origins, forwarded addresses, request ids.
        h2Request(session, {
          ':path': '/v1/pets',
          ...key,
          [`x-${v}`]: v,
          'user-agent': v,
          'x-request-id': `id-${v}`,
          'x-forwarded-for': `10.${i % 250}.0.1`,
          origin: `https://${v}.example`,
        }),
        h2Request(session, { ':path': '/v1/pets', authorization: `Bearer asg_test_${v}AAAAAAAAAAAAAAAAAAAAAAAA` }),
        h2Request(session, { ':path': '/v1/pets', authorization: `Bearer ${v}` }),
        h2Request(session, { ':path': '/v1/pets', authorization: `Basic ${v}` }),
        h2Request(
          session,
          { ':method': 'POST', ':path': '/v1/pets', ...key, 'content-type': `application/${v}` },
          '{}',
        ),
        h2Request(
          session,
          { ':method': 'POST', ':path': '/v1/pets', ...key, 'content-type': 'application/json' },
          `{"name":"${v}","categoryId":1,"x${v}":1}`,
        ),
        // The authority (and a host that differs from it).
        h2Request(session, { ':path': '/v1/pets', ':authority': `${v}.example`, ...key }),
        h2Request(session, { ':path': '/v1/pets', host: `${v}.example`, ...key }),
      ]);
    });
  } finally {
    session.close();
  }

  // HTTP/1.1 over TLS: every method Node's parser knows, paths, headers.
  const http1 = new TlsClient(product.gatewayUrl, certs.caCert, 'http/1.1');
  try {
    for (const [i, method] of PARSED_METHODS.entries()) {
      await http1.request({
        method,
        path: i % 2 === 0 ? '/v1/pets' : `/v1/${round}${i}`,
        headers: i % 2 === 0 ? key : {},
      });
    }
    await inBatches(n, 20, async (i) => {
      const v = `${round}${i}`;
      await Promise.all([
        http1.request({ path: `/v1/pets/${v}`, headers: key }),
        http1.request({ path: `/${v}`, headers: { ...key, [`x-${v}`]: v, 'x-request-id': `id-${v}` } }),
        http1.request({ path: '/v1/pets', headers: { authorization: `Bearer asg_test_${v}AAAAAAAAAAAAAAAAAAAAAAAA` } }),
      ]);
    });
  } finally {
    http1.close();
  }

  // Raw HTTP/1.x lines: versions, methods the parser refuses, absolute and asterisk forms.
  await inBatches(Math.min(n, 40), 10, async (i) => {
    const v = `${round}${i}`;
    await Promise.all([
      rawTls(`GET /v1/pets HTTP/1.0\r\nHost: ${v}\r\n\r\n`),
      rawTls(`GET /v1/pets HTTP/${(i % 9) + 1}.${i % 10}\r\nHost: a\r\n\r\n`),
      rawTls(`${methodToken(round, i)} /v1/pets HTTP/1.1\r\nHost: a\r\n\r\n`),
      rawTls(`GET https://${v}.example/v1/pets HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`),
      rawTls(`OPTIONS * HTTP/1.1\r\nHost: ${v}\r\nConnection: close\r\n\r\n`),
      rawTls(`GET /v1/pets HTTP/1.1\r\nHost: a\r\n${v}: \u0001\r\n\r\n`),
    ]);
  });

  // The inventory's own listener, reached directly: its methods, paths, tokens.
  const inventoryUrl = product.inventory!.url;
  for (const [i, method] of PARSED_METHODS.entries())
    await plainRequest(inventoryUrl, method, i % 2 === 0 ? '/v1/pets' : `/${round}${i}`);
  await inBatches(n, 20, (i) =>
    plainRequest(inventoryUrl, 'GET', `/v1/pets/${round}${i}`, { 'x-gateway-token': `${round}${i}` }),
  );

  // The admin listener: paths and methods, with the right token (a wrong one is the lockout's business).
  const admin = { authorization: `Bearer ${product.adminToken}` };
  await inBatches(Math.min(n, 50), 10, (i) =>
    plainRequest(product.adminUrl, PARSED_METHODS[i % PARSED_METHODS.length]!, `/admin/${round}${i}`, admin),
  );
}

async function series(): Promise<Series[]> {
  const res = await fetch(`${product.adminUrl}/metrics`);
  expect(res.status).toBe(200);
  return seriesOf(await res.text());
}

test('5,000 distinct HTTP/2 methods, and every other value a client controls, add no series to any metric', async () => {
  await sendRound('a', 2, 2);
  await sendRound('b', 2, 2);
  const before = await series();
  await sendRound('c', 200, 5000);
  const after = await series();
  const beforeIds = new Set(before.map((s) => s.id));
  const added = after.filter((s) => !beforeIds.has(s.id)).map((s) => s.id);
  expect(added).toEqual([]);
  // And the rounds did reach the listeners: the unknown methods were counted, under `other`.
  const other = after.filter((s) => s.name === 'gateway_http_requests_total' && s.labels.method === 'other');
  expect(other.reduce((sum, s) => sum + s.value, 0)).toBeGreaterThanOrEqual(5000);
  expect(
    after.filter((s) => s.name === 'inventory_http_requests_total' && s.labels.method === 'other').length,
  ).toBeGreaterThan(0);
  // Whatever the protocol and listener, a method label holds a method HTTP defines, `unparsed` or `other`.
  const methods = new Set(after.flatMap((s) => (s.labels.method === undefined ? [] : [s.labels.method])));
  expect(
    [...methods].filter(
      (m) => !['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'unparsed', 'other'].includes(m),
    ),
  ).toEqual([]);
});
