import http from 'node:http';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { freePort } from '../../support/redis-server';
import { createLogger } from '../../../src/shared/logger';
import { UPSTREAM_TOKEN_HEADER } from '../../../src/shared/http/upstream-token';
import { startInventory, type RunningInventory } from '../../../src/inventory/server';
import {
  PROMISED_BODY_BYTES,
  SENT_BODY_BYTES,
  jsonBody,
  metricValue,
  scrapeMetrics,
  sendToGateway,
  startFaultyUpstream,
  type Fault,
  type FaultyUpstream,
  type GatewayReply,
} from './fake-upstreams';
import { eventually } from '../../support/eventually';
import { expectError } from '../../support/errors';

/**
 * The whole product (gateway, admin listener, Redis) in front of an upstream that misbehaves, once
 * with each forwarder. test/integration/forwarder/contract.test.ts pins what each forwarder does on
 * its own; this suite checks what a client and an operator see of the same faults through the whole
 * pipeline: the contract's status and Error body, the rate-limit headers and X-Request-Id, the
 * gateway_upstream_errors_total reason on /metrics, and a gateway that goes on serving afterwards.
 */

/** Small, so that the no-answer case ends quickly; every other fault must be named well before it. */
const TIMEOUT_MS = 500;
/** An upper bound for faults that need no timeout (a hang guard, not a performance target). */
const QUICK_MS = TIMEOUT_MS + 1000;

const RATE_LIMIT_HEADERS = [
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'ratelimit-policy',
  'ratelimit',
];

function expectGatewayHeaders(reply: GatewayReply, requestId: string): void {
  for (const name of RATE_LIMIT_HEADERS)
    expect({ name, value: reply.headers[name] }).toEqual({ name, value: expect.any(String) });
  expect(Number(reply.headers['x-ratelimit-limit'])).toBeGreaterThan(0);
  expect(reply.headers['x-request-id']).toBe(requestId);
}

/** The kit's expectError on a reply read from a raw socket, which must also be complete. */
function expectErrorReply(reply: GatewayReply, status: number, code: string): void {
  expect(reply.complete).toBe(true);
  expectError({ status: reply.status, body: jsonBody(reply), headers: reply.headers }, status, code);
  expect(reply.body.toString('utf8')).not.toMatch(/\n\s+at |Error:/);
}

async function upstreamErrors(product: ProductHarness, reason?: string): Promise<number> {
  return metricValue(await scrapeMetrics(product.adminUrl), 'gateway_upstream_errors_total', reason ? { reason } : {});
}

/** /readyz answers 200 for a fault every instance shares (the inventory) and names it in `degraded` (CONTRACT §5). */
async function readiness(product: ProductHarness): Promise<{ readyz: number; degraded: unknown; healthz: number }> {
  const readyz = await fetch(`${product.adminUrl}/readyz`);
  const body = (await readyz.json()) as { degraded?: unknown };
  const healthz = await fetch(`${product.adminUrl}/healthz`);
  await healthz.arrayBuffer();
  return { readyz: readyz.status, degraded: body.degraded ?? [], healthz: healthz.status };
}

async function businessKey(product: ProductHarness, name: string): Promise<string> {
  const { key } = await product.keyService.create({ name, plan: 'business' });
  return `Bearer ${key}`;
}

describe.each(['undici', 'http-proxy'] as const)(
  'upstream faults through the whole product, upstream.forwarder = %s',
  (forwarder) => {
    describe('an upstream that misbehaves on request', () => {
      let upstream: FaultyUpstream;
      let product: ProductHarness;
      let auth: string;

      beforeAll(async () => {
        upstream = await startFaultyUpstream();
        // The breaker out of reach: these tests send a fault, then a healthy request, about 20 within
        // 10 s, and half of 20 failing opens it (its own suites: brownout, pool-reset, circuit-breaker).
        const breaker = { minimumRequests: 1000 };
        product = await startTestProduct({
          overrides: { upstream: { url: upstream.url, timeoutMs: TIMEOUT_MS, forwarder, circuitBreaker: breaker } },
        });
        auth = await businessKey(product, 'faults');
      });
      afterAll(async () => {
        await product?.close();
        await upstream?.close();
      });

      let sequence = 0;
      function request(fault: Fault): { requestId: string; reply: Promise<GatewayReply> } {
        const requestId = `fault-${forwarder}-${fault}-${++sequence}`;
        return {
          requestId,
          reply: sendToGateway(`${product.gatewayUrl}/v1/pets?fault=${fault}`, {
            headers: { authorization: auth, 'x-request-id': requestId },
          }),
        };
      }

      async function expectStillServing(): Promise<void> {
        const { requestId, reply } = request('none');
        const healthy = await reply;
        expect({
          status: healthy.status,
          body: healthy.body.toString(),
          from: healthy.headers['x-fake-upstream'],
        }).toEqual({ status: 200, body: '[]', from: 'healthy' });
        expectGatewayHeaders(healthy, requestId);
      }

      it('passes a healthy answer through (the baseline the faults are measured against)', async () => {
        await expectStillServing();
        expect(await upstreamErrors(product)).toBe(0);
        // It went through the whole pipeline: signed for the inventory, with the caller's credentials stripped.
        const last = upstream.received[upstream.received.length - 1]!;
        expect(last.headers).toMatch(new RegExp(`^${UPSTREAM_TOKEN_HEADER}: \\S+$`, 'im'));
        expect(last.headers).not.toMatch(/^authorization:/im);
      });

      it('no answer: 504 upstream_timeout once the timeout has passed, reason timeout, and the silent connection is closed', async () => {
        const before = await upstreamErrors(product, 'timeout');
        const openBefore = upstream.openSockets();
        const { requestId, reply } = request('silent');
        const res = await reply;
        expectErrorReply(res, 504, 'upstream_timeout');
        expectGatewayHeaders(res, requestId);
        // It waited for the timeout (a lower bound with slack for timer granularity), and no longer than needed.
        expect(res.elapsedMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
        expect(await upstreamErrors(product, 'timeout')).toBe(before + 1);
        // The gateway let go of the connection the silent upstream was holding.
        await eventually(() => upstream.openSockets() <= openBefore, { what: 'the silent connection is closed' });
        await expectStillServing();
      });

      it('connection reset before any answer: 502 upstream_unavailable, reason reset, well before the timeout', async () => {
        const before = await upstreamErrors(product, 'reset');
        const { requestId, reply } = request('reset-before-head');
        const res = await reply;
        expectErrorReply(res, 502, 'upstream_unavailable');
        expectGatewayHeaders(res, requestId);
        expect(res.elapsedMs).toBeLessThan(QUICK_MS);
        expect(await upstreamErrors(product, 'reset')).toBe(before + 1);
        await expectStillServing();
      });

      it('an invalid HTTP answer (HELLO): 502 upstream_unavailable, reason invalid_response, well before the timeout', async () => {
        const before = await upstreamErrors(product, 'invalid_response');
        const openBefore = upstream.openSockets();
        const { requestId, reply } = request('garbage');
        const res = await reply;
        expectErrorReply(res, 502, 'upstream_unavailable');
        expectGatewayHeaders(res, requestId);
        expect(res.elapsedMs).toBeLessThan(QUICK_MS);
        expect(await upstreamErrors(product, 'invalid_response')).toBe(before + 1);
        // The fake left that connection open: the gateway must close it, not park it in its pool.
        await eventually(() => upstream.openSockets() <= openBefore, {
          what: 'the connection that spoke garbage is closed',
        });
        await expectStillServing();
      });

      it('a connection cut mid-response, after the head went out: the client sees the 200 cut short and its connection closed; reason reset', async () => {
        const before = await upstreamErrors(product, 'reset');
        const { requestId, reply } = request('cut-mid-body');
        const res = await reply;
        // The status line was already sent: the only honest signal left is an aborted response.
        expect({ status: res.status, complete: res.complete, declared: res.headers['content-length'] }).toEqual({
          status: 200,
          complete: false,
          declared: String(PROMISED_BODY_BYTES),
        });
        expect(res.body.length).toBeLessThanOrEqual(SENT_BODY_BYTES);
        expectGatewayHeaders(res, requestId);
        expect(res.elapsedMs).toBeLessThan(QUICK_MS);
        await eventually(async () => (await upstreamErrors(product, 'reset')) === before + 1, {
          what: 'gateway_upstream_errors_total{reason="reset"} counted the cut',
        });
        await expectStillServing();
      });

      it('every fault in turn, twice over, leaves the gateway serving and counts each failure once', async () => {
        const before = await upstreamErrors(product);
        for (let round = 0; round < 2; round++) {
          for (const fault of ['reset-before-head', 'garbage', 'cut-mid-body'] as const) {
            await request(fault).reply;
            await expectStillServing();
          }
        }
        await eventually(async () => (await upstreamErrors(product)) === before + 6, { what: 'six failures counted' });
        const health = await readiness(product);
        expect(health).toEqual({ readyz: 200, degraded: [], healthz: 200 });
      });
    });

    describe('an upstream nobody listens on (connection refused)', () => {
      let product: ProductHarness;
      let auth: string;

      beforeAll(async () => {
        const url = `http://127.0.0.1:${await freePort()}`;
        product = await startTestProduct({ overrides: { upstream: { url, timeoutMs: TIMEOUT_MS, forwarder } } });
        auth = await businessKey(product, 'refused');
      });
      afterAll(async () => {
        await product?.close();
      });

      it('is 502 upstream_unavailable, reason refused, well before the timeout, every time; /readyz stays 200 naming the upstream, /healthz stays 200', async () => {
        for (let i = 1; i <= 3; i++) {
          const requestId = `refused-${forwarder}-${i}`;
          const res = await sendToGateway(`${product.gatewayUrl}/v1/pets`, {
            headers: { authorization: auth, 'x-request-id': requestId },
          });
          expectErrorReply(res, 502, 'upstream_unavailable');
          expectGatewayHeaders(res, requestId);
          expect(res.elapsedMs).toBeLessThan(QUICK_MS);
          expect(await upstreamErrors(product, 'refused')).toBe(i);
        }
        expect(await readiness(product)).toEqual({ readyz: 200, degraded: ['upstream'], healthz: 200 });
      });

      it('a POST is refused the same way: never a 201, never a hang', async () => {
        const requestId = `refused-post-${forwarder}`;
        const res = await sendToGateway(`${product.gatewayUrl}/v1/pets`, {
          method: 'POST',
          headers: { authorization: auth, 'x-request-id': requestId, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'Nowhere', categoryId: 1 }),
        });
        expectErrorReply(res, 502, 'upstream_unavailable');
        expectGatewayHeaders(res, requestId);
      });
    });

    describe('the inventory stopped while the gateway runs, then started again', () => {
      let product: ProductHarness;
      let auth: string;
      // A separate inventory (upstream.url), as production runs it: the embedded one lives and dies with the gateway.
      let inventory: RunningInventory;
      let restarted: RunningInventory | null = null;

      beforeAll(async () => {
        const seed = await startTestProduct({ overrides: { upstream: { timeoutMs: 2000, forwarder } } });
        const config = seed.config;
        await seed.close();
        inventory = await startInventory(config, { port: 0, host: '127.0.0.1', logger: createLogger('silent') });
        product = await startTestProduct({
          dataDir: config.dataDir,
          overrides: { upstream: { url: inventory.url, timeoutMs: 2000, forwarder } },
        });
        auth = await businessKey(product, 'stopped');
      });
      afterAll(async () => {
        await restarted?.close();
        await product?.close();
      });

      it('answers 502 while it is down (readyz stays 200 and names the upstream, healthz stays 200) and serves again once it is back', async () => {
        const first = await sendToGateway(`${product.gatewayUrl}/v1/pets`, { headers: { authorization: auth } });
        expect(first.status).toBe(200);
        const port = inventory.port;

        // The real inventory goes away; the gateway's idle keep-alive connection to it is closed too.
        await inventory.close();
        const before = await upstreamErrors(product);
        for (let i = 1; i <= 3; i++) {
          const requestId = `stopped-${forwarder}-${i}`;
          const res = await sendToGateway(`${product.gatewayUrl}/v1/pets`, {
            headers: { authorization: auth, 'x-request-id': requestId },
          });
          expectErrorReply(res, 502, 'upstream_unavailable');
          expectGatewayHeaders(res, requestId);
          expect(res.elapsedMs).toBeLessThan(2000 + 1000);
        }
        const metrics = await scrapeMetrics(product.adminUrl);
        const total = metricValue(metrics, 'gateway_upstream_errors_total');
        expect(total).toBe(before + 3);
        // Refused, unless the first request raced the close of a pooled connection (then reset).
        expect(metricValue(metrics, 'gateway_upstream_errors_total', { reason: 'refused' })).toBeGreaterThanOrEqual(2);
        expect(await readiness(product)).toEqual({ readyz: 200, degraded: ['upstream'], healthz: 200 });

        restarted = await startInventory(product.config, { port, host: '127.0.0.1', logger: createLogger('silent') });
        await eventually(
          async () =>
            (await sendToGateway(`${product.gatewayUrl}/v1/pets`, { headers: { authorization: auth } })).status === 200,
          { what: 'the gateway serves again' },
        );
        expect(await readiness(product)).toEqual({ readyz: 200, degraded: [], healthz: 200 });
        expect(await upstreamErrors(product)).toBe(before + 3);
      });
    });

    describe('clients that hang up before the upstream answers', () => {
      const HANG_UPS = 50;
      let upstream: FaultyUpstream;
      let product: ProductHarness;
      let auth: string;

      beforeAll(async () => {
        upstream = await startFaultyUpstream();
        // A long timeout: whatever closes the upstream connections here, it is not the timeout.
        product = await startTestProduct({
          overrides: { upstream: { url: upstream.url, timeoutMs: 60_000, forwarder } },
        });
        auth = await businessKey(product, 'hang-ups');
      });
      afterAll(async () => {
        await product?.close();
        await upstream?.close();
      });

      it(`${HANG_UPS} hang-ups close every upstream connection, count no upstream failure, and the gateway keeps serving`, async () => {
        const errorsBefore = await upstreamErrors(product);
        // Ten at a time: each request is sent, reaches the upstream (so it is in flight there), then its client hangs up.
        for (let batch = 0; batch < HANG_UPS / 10; batch++) {
          await Promise.all(
            Array.from({ length: 10 }, async (_, i) => {
              const target = `/v1/pets?fault=silent&n=${batch * 10 + i}`;
              const req = http.request(`${product.gatewayUrl}${target}`, {
                agent: false,
                headers: { authorization: auth },
              });
              req.on('error', () => {});
              req.end();
              await eventually(() => upstream.received.some((r) => r.target === target), {
                what: `request ${target} reaches the upstream`,
              });
              req.destroy();
            }),
          );
        }
        expect(upstream.received.filter((r) => r.fault === 'silent')).toHaveLength(HANG_UPS);

        // The connections that carried the abandoned requests are closed at once (the timeout is a minute away).
        await eventually(() => upstream.openSocketsThatCarriedRequests() === 0, {
          what: 'the connections of abandoned requests are closed',
        });
        // undici's pool reconnects after each connection it drops for an abort, and leaves the new one
        // idle until its keep-alive timeout (4 s): bounded churn, not a leak. Every connection goes in the end.
        await eventually(() => upstream.openSockets() === 0, {
          timeoutMs: 10_000,
          what: 'every upstream connection is closed',
        });
        expect(upstream.acceptedSockets()).toBeLessThanOrEqual(2 * HANG_UPS + 1);
        expect(await upstreamErrors(product)).toBe(errorsBefore);

        const res = await sendToGateway(`${product.gatewayUrl}/v1/pets?fault=none`, {
          headers: { authorization: auth },
        });
        expect({ status: res.status, body: res.body.toString() }).toEqual({ status: 200, body: '[]' });
        // Only the healthy request's keep-alive connection is open.
        expect(upstream.openSockets()).toBe(1);
        expect(await readiness(product)).toEqual({ readyz: 200, degraded: [], healthz: 200 });
      });
    });
  },
);
