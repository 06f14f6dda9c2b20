import request from 'supertest';
import { countPets, startTestProduct, type ProductHarness } from './gateway-kit';
import { logEntries, openConnection, scrape, total, type RawConnection } from './listener-kit';
import { eventually } from '../../support/eventually';
import { createKey } from '../../support/keys';

/**
 * The time bounds of config `server.*` on both listeners (src/shared/http/http-server.ts builds both with
 * them): a client sending its body too slowly is cut off after server.requestTimeoutMs while others
 * are served, and an idle keep-alive connection is closed after server.keepAliveTimeoutMs. The
 * defaults are 30 s and 65 s; the short values here make any cut-off within a few seconds the
 * configured one. (The slow-headers case is in hardening.test.ts.)
 */

const REQUEST_TIMEOUT_MS = 500;
const KEEP_ALIVE_TIMEOUT_MS = 1000;
/** node:http looks for requests past their time once a second (TIMEOUT_CHECK_INTERVAL_MS). */
const CHECK_INTERVAL_MS = 1000;
/**
 * Node ≥ 24 keeps an idle socket open keepAliveTimeoutBuffer (default 1 s) past keepAliveTimeout,
 * so that a client trusting `Keep-Alive: timeout=N` always closes first; older Nodes have no buffer.
 */
const KEEP_ALIVE_BUFFER_MS = 1000;
/** Room for a loaded two-core machine; still far below the defaults the short values replace. */
const SLACK_MS = 2000;

const TIMED_OUT = 'request timed out before it arrived';
const CLIENT_ADDRESS = '127.0.0.31';

let product: ProductHarness;
let auth: string;

beforeAll(async () => {
  product = await startTestProduct({
    redis: false,
    overrides: {
      server: {
        headersTimeoutMs: REQUEST_TIMEOUT_MS,
        requestTimeoutMs: REQUEST_TIMEOUT_MS,
        keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
      },
      anonymous: { perMinute: 1000 },
    },
  });
  // Limits no loop of requests in these tests comes near: only the timeouts may refuse anything.
  ({ auth } = await createKey(product, { plan: 'enterprise', limits: { perMinute: 1_000_000, perDay: 10_000_000 } }));
});

afterAll(async () => {
  await product?.close();
});

interface Listener {
  name: 'public' | 'admin';
  url: () => string;
  /** A request whose body is announced and then trickled, never completed within the test. */
  slowWrite: () => string;
  /** Something the listener serves meanwhile, for another client. */
  serve: () => Promise<number>;
  /** A keep-alive request's bytes. */
  keepAlive: () => string;
  /** What the slow write would have created, counted. */
  created: () => Promise<number>;
}

const listeners: Listener[] = [
  {
    name: 'public',
    url: () => product.gatewayUrl,
    slowWrite: () =>
      `POST /v1/pets HTTP/1.1\r\nHost: gateway\r\nAuthorization: ${auth}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":"`,
    serve: async () => (await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth)).status,
    keepAlive: () => `GET /v1/pets HTTP/1.1\r\nHost: gateway\r\nAuthorization: ${auth}\r\n\r\n`,
    created: async () => countPets(product),
  },
  {
    name: 'admin',
    url: () => product.adminUrl,
    slowWrite: () =>
      `POST /admin/keys HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer ${product.adminToken}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"plan":"free","name":"`,
    serve: async () =>
      (await request(product.adminUrl).get('/admin/keys').set('Authorization', `Bearer ${product.adminToken}`)).status,
    keepAlive: () => `GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n`,
    created: async () => (await product.keyService.list()).length,
  },
];

/** Writes one more body byte every 50 ms until the connection closes: the client is slow, never idle. */
function trickle(connection: RawConnection): () => void {
  const timer = setInterval(() => {
    if (!connection.socket.destroyed) connection.write('a');
  }, 50);
  return () => clearInterval(timer);
}

describe.each(listeners)('the $name listener', (listener) => {
  it(`cuts off a client whose body takes longer than server.requestTimeoutMs (${REQUEST_TIMEOUT_MS} ms), serving others meanwhile`, async () => {
    const createdBefore = await listener.created();
    const before = await scrape(product, 'gateway_http_requests_total');
    const linesBefore = product.logs.lines.length;

    const slow = await openConnection(listener.url(), CLIENT_ADDRESS);
    const started = performance.now();
    slow.write(listener.slowWrite());
    const stop = trickle(slow);
    const bound = REQUEST_TIMEOUT_MS + CHECK_INTERVAL_MS + SLACK_MS;
    let slowOpen = true;
    const slowClosed = slow.closed(bound).finally(() => {
      slowOpen = false;
    });
    try {
      // Another client is served, one request after the other, for as long as the slow one is held.
      const statuses: number[] = [];
      while (slowOpen && performance.now() - started < bound) statuses.push(await listener.serve());
      expect(statuses.length).toBeGreaterThan(0);
      expect(statuses.filter((status) => status !== 200)).toEqual([]);
      // Closed without an answer (the request never arrived whole; nginx does the same).
      const { at, bytes } = await slowClosed;
      expect(bytes).toBe('');
      expect(at - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS);
      expect(at - started).toBeLessThan(bound);
    } finally {
      stop();
      slow.socket.destroy();
    }

    // Logged once with the client's address, and a slow client is no error of ours.
    const written = logEntries(product).slice(linesBefore);
    expect(written.filter((entry) => Number(entry.level) >= 50)).toEqual([]);
    const after = await scrape(product, 'gateway_http_requests_total');
    const unparsed = { method: 'unparsed', route: 'unmatched', status_code: '0', plan: 'anonymous' };
    if (listener.name === 'public') {
      // The gateway had started on it (the key checked, the body on its way to the inventory): its
      // own request line records it, under its route and the request id the inventory saw, with
      // no status (none reached the client) and why it was cut off.
      const cutOff = written.filter((entry) => entry.msg === 'request' && entry.clientAddress === CLIENT_ADDRESS);
      expect(cutOff).toEqual([
        expect.objectContaining({
          method: 'POST',
          route: '/v1/pets',
          status: null,
          cutOff: 'ERR_HTTP_REQUEST_TIMEOUT',
          plan: 'enterprise',
          requestId: expect.any(String),
        }),
      ]);
      expect(written.filter((entry) => entry.msg === TIMED_OUT)).toEqual([]);
      const counted = { method: 'POST', route: '/v1/pets', status_code: '0', plan: 'enterprise' };
      expect(total(after, counted) - total(before, counted)).toBe(1);
      expect(total(after, unparsed) - total(before, unparsed)).toBe(0);
    } else {
      // Express has no such record of its own: the listener's line stands for it, and it is no gateway traffic.
      expect(written.filter((entry) => entry.msg === TIMED_OUT)).toEqual([
        expect.objectContaining({
          reason: 'ERR_HTTP_REQUEST_TIMEOUT',
          clientAddress: CLIENT_ADDRESS,
          status: null,
          component: 'admin',
        }),
      ]);
      expect(total(after, unparsed) - total(before, unparsed)).toBe(0);
    }
    // Nothing half-sent was written.
    expect(await listener.created()).toBe(createdBefore);
  });

  it(`closes a keep-alive connection left idle for server.keepAliveTimeoutMs (${KEEP_ALIVE_TIMEOUT_MS} ms), and not before`, async () => {
    const connection = await openConnection(listener.url());
    try {
      connection.write(listener.keepAlive());
      const first = await connection.response(5000);
      expect(first.status).toBe(200);
      expect(first.headers['connection']).toEqual(['keep-alive']);
      expect(first.headers['keep-alive']).toEqual([`timeout=${KEEP_ALIVE_TIMEOUT_MS / 1000}`]);
      // Used again at once, the connection serves a second request.
      connection.write(listener.keepAlive());
      expect((await connection.response(5000)).status).toBe(200);
      const idleFrom = performance.now();

      const { at, bytes } = await connection.closed(KEEP_ALIVE_TIMEOUT_MS + KEEP_ALIVE_BUFFER_MS + SLACK_MS);
      expect(bytes).toBe('');
      expect(at - idleFrom).toBeGreaterThanOrEqual(KEEP_ALIVE_TIMEOUT_MS - 20);
      expect(at - idleFrom).toBeLessThan(KEEP_ALIVE_TIMEOUT_MS + KEEP_ALIVE_BUFFER_MS + SLACK_MS);
    } finally {
      connection.socket.destroy();
    }
  });
});

it('records a request whose client hangs up before sending its whole body, under its route, with no status', async () => {
  const before = await scrape(product, 'gateway_http_requests_total');
  const linesBefore = product.logs.lines.length;
  const leaving = await openConnection(product.gatewayUrl, '127.0.0.32');
  leaving.write(listeners[0]!.slowWrite());
  // Let the gateway take it up (key checked, forward started), then hang up.
  await new Promise((resolve) => setTimeout(resolve, 100));
  leaving.socket.destroy();
  const lines = () =>
    logEntries(product)
      .slice(linesBefore)
      .filter((entry) => entry.msg === 'request' && entry.clientAddress === '127.0.0.32');
  await eventually(async () => lines().length > 0, { timeoutMs: 3000 });
  expect(lines()).toEqual([
    expect.objectContaining({
      method: 'POST',
      route: '/v1/pets',
      status: null,
      cutOff: 'client closed the connection',
      plan: 'enterprise',
    }),
  ]);
  const after = await scrape(product, 'gateway_http_requests_total');
  const counted = { method: 'POST', route: '/v1/pets', status_code: '0', plan: 'enterprise' };
  expect(total(after, counted) - total(before, counted)).toBe(1);
});
