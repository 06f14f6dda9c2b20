import http from 'node:http';
import type net from 'node:net';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { testRedisUrl, uniqueNamespace } from '../../support/test-redis';
import { metricValue, scrapeMetrics } from '../reliability/fake-upstreams';
import { eventually } from '../../support/eventually';
import { adminRequest } from '../admin/admin-kit';
import {
  isolatedEnv,
  LONG_ADMIN_TOKEN,
  LONG_SIGNING_SECRET,
  startMain,
  tempFile,
  type MainProcess,
} from '../startup/startup-kit';

/**
 * CONTRACT §3, maxInFlight: a key's requests being forwarded at once, across the instances on one
 * Redis (per instance without Redis). One more gets 429 concurrency_limited with Retry-After: 1,
 * consumes no unit and counts toward no ban; a slot is freed when the answer ends, and the slots
 * of an instance killed with SIGKILL come back within upstream.timeoutMs + 5 s.
 */

const MAX_IN_FLIGHT = 5;
const CONCURRENT = 20;
const TIMEOUT_MS = 4000;
const PLANS = { gated: { perMinute: 1000, perDay: 100_000, maxInFlight: MAX_IN_FLIGHT } };

/** An inventory that holds every request until the test opens the gate; requests after that are answered at once. */
interface GatedInventory {
  url: string;
  held: number;
  open(): void;
  shut(): void;
  close(): Promise<void>;
}

async function startGatedInventory(): Promise<GatedInventory> {
  const waiting: http.ServerResponse[] = [];
  const sockets = new Set<net.Socket>();
  let open = false;
  const answer = (res: http.ServerResponse) => res.writeHead(200, { 'content-type': 'application/json' }).end('[]');
  const server = http.createServer((req, res) => {
    req.resume();
    if (open) return answer(res);
    waiting.push(res);
    res.on('close', () => waiting.splice(waiting.indexOf(res) >>> 0, waiting.includes(res) ? 1 : 0));
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    get held() {
      return waiting.length;
    },
    open() {
      open = true;
      for (const res of waiting.splice(0)) answer(res);
    },
    shut() {
      open = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

interface Reply {
  status: number;
  code?: string;
  retryAfter: string | null;
  /** X-RateLimit-Remaining: every /v1 answer carries the key's windows, a concurrency refusal included. */
  remaining: string | null;
}

async function get(url: string, auth: string): Promise<Reply> {
  const res = await fetch(`${url}/v1/pets`, { headers: { authorization: auth } });
  const body = (await res.json()) as { code?: string };
  return {
    status: res.status,
    code: body.code,
    retryAfter: res.headers.get('retry-after'),
    remaining: res.headers.get('x-ratelimit-remaining'),
  };
}

const overrides = (inventoryUrl: string) => ({ plans: PLANS, upstream: { url: inventoryUrl, timeoutMs: TIMEOUT_MS } });

describe('maxInFlight', () => {
  let inventory: GatedInventory;
  beforeAll(async () => {
    inventory = await startGatedInventory();
  });
  afterAll(async () => {
    await inventory?.close();
  });

  /** Sends CONCURRENT requests spread over the instances while the inventory holds them; opens the gate once the limit's worth is held and every refusal is in. */
  async function burst(instances: ProductHarness[], auth: string): Promise<Reply[]> {
    inventory.shut();
    const replies: Reply[] = [];
    const sent = Array.from({ length: CONCURRENT }, (_, i) =>
      get(instances[i % instances.length]!.gatewayUrl, auth).then((reply) => {
        replies.push(reply);
        return reply;
      }),
    );
    await eventually(() => replies.length >= CONCURRENT - MAX_IN_FLIGHT && inventory.held >= MAX_IN_FLIGHT, {
      timeoutMs: 15_000,
      what: 'the refusals are in and the admitted requests reached the inventory',
    });
    expect({ answered: replies.length, held: inventory.held }).toEqual({
      answered: CONCURRENT - MAX_IN_FLIGHT,
      held: MAX_IN_FLIGHT,
    });
    inventory.open();
    return Promise.all(sent);
  }

  function expectExactlyTheLimit(replies: Reply[]): void {
    const refused = replies.filter((reply) => reply.status === 429);
    expect(replies.filter((reply) => reply.status === 200)).toHaveLength(MAX_IN_FLIGHT);
    expect(refused).toHaveLength(CONCURRENT - MAX_IN_FLIGHT);
    // Nothing consumed: the refusals show the minute as the admitted requests left it (1000 - 5).
    for (const reply of refused)
      expect(reply).toEqual({
        status: 429,
        code: 'concurrency_limited',
        retryAfter: '1',
        remaining: expect.stringMatching(/^99\d$/),
      });
  }

  describe('two instances on one Redis', () => {
    const namespace = uniqueNamespace('inflight');
    let a: ProductHarness;
    let b: ProductHarness;
    let main: MainProcess | null = null;

    beforeAll(async () => {
      a = await startTestProduct({ namespace, overrides: overrides(inventory.url) });
      b = await startTestProduct({ namespace, overrides: overrides(inventory.url) });
    });
    afterAll(async () => {
      if (main && main.child.exitCode === null && main.child.signalCode === null) main.child.kill('SIGKILL');
      await main?.exited;
      await b?.close();
      await a?.close();
    });

    it(`admit exactly ${MAX_IN_FLIGHT} of ${CONCURRENT} concurrent requests, consume no unit for the rest, ban nobody, and free the slots when answered`, async () => {
      const { record, key } = await a.keyService.create({ name: 'gated', plan: 'gated' });
      const id = record.id;
      const auth = `Bearer ${key}`;
      expectExactlyTheLimit(await burst([a, b], auth));
      // The refusals took no unit: the minute window counts the 5 admitted only.
      const shown = (await (
        await fetch(`${a.adminUrl}/admin/keys/${id}`, { headers: { authorization: `Bearer ${a.adminToken}` } })
      ).json()) as {
        usage: { minute: { limit: number; remaining: number } };
        bannedUntil: string | null;
      };
      expect({ used: shown.usage.minute.limit - shown.usage.minute.remaining, bannedUntil: shown.bannedUntil }).toEqual(
        { used: MAX_IN_FLIGHT, bannedUntil: null },
      );
      expect(
        metricValue(await scrapeMetrics(a.adminUrl), 'gateway_inflight_rejections_total', { plan: 'gated' }) +
          metricValue(await scrapeMetrics(b.adminUrl), 'gateway_inflight_rejections_total', { plan: 'gated' }),
      ).toBe(CONCURRENT - MAX_IN_FLIGHT);
      // Every slot came back with its answer: the next burst finds all five free again.
      expectExactlyTheLimit(await burst([b, a], auth));
    }, 60_000);

    it(`a key of a consumer (its windows under the consumer's hash tag, one script with the consumer's) gets exactly ${MAX_IN_FLIGHT} of ${CONCURRENT} too, and the consumer counts only the admitted`, async () => {
      const consumer = await adminRequest(a, 'post', '/admin/consumers').send({
        name: 'Gated Ltd',
        limits: { perMinute: 1000, perDay: 100_000 },
      });
      expect(consumer.status).toBe(201);
      const created = await adminRequest(a, 'post', '/admin/keys').send({
        name: 'gated-of-consumer',
        plan: 'gated',
        consumerId: consumer.body.id,
      });
      expect(created.status).toBe(201);
      const auth = `Bearer ${created.body.key as string}`;
      // Both instances decide with the consumer (it reaches the other within a second).
      for (const instance of [a, b]) {
        await eventually(
          async () =>
            (
              (await (await fetch(`${instance.gatewayUrl}/v1/usage`, { headers: { authorization: auth } })).json()) as {
                consumer?: { id: string };
              }
            ).consumer?.id === consumer.body.id,
          {
            timeoutMs: 5000,
            what: "the instance knows the key's consumer",
          },
        );
      }
      expectExactlyTheLimit(await burst([a, b], auth));
      // The slots were released under the key's windows id: a second burst finds all five free again.
      expectExactlyTheLimit(await burst([b, a], auth));
      const shown = await adminRequest(a, 'get', `/admin/consumers/${consumer.body.id as string}`);
      expect(shown.body.usage.day).toMatchObject({ limit: 100_000, remaining: 100_000 - 2 * MAX_IN_FLIGHT });
    }, 60_000);

    it('never refuses a one-at-a-time client at maxInFlight 1 on one instance: each request finds the slot of the one before free', async () => {
      const { key } = await a.keyService.create({
        name: 'serial',
        plan: 'gated',
        limits: { perMinute: 1000, perDay: 100_000, maxInFlight: 1 },
      });
      inventory.open();
      const statuses: number[] = [];
      for (let i = 0; i < 40; i++) statuses.push((await get(a.gatewayUrl, `Bearer ${key}`)).status);
      expect(statuses).toEqual(Array(40).fill(200));
    }, 60_000);

    it('never refuses a one-at-a-time client at maxInFlight 1 sent to the instances in turn: 40 requests, every one 200 (a lease near the limit is released at once)', async () => {
      const { key } = await a.keyService.create({
        name: 'round-robin',
        plan: 'gated',
        limits: { perMinute: 1000, perDay: 100_000, maxInFlight: 1 },
      });
      inventory.open();
      const statuses: number[] = [];
      for (let i = 0; i < 40; i++) statuses.push((await get([a, b][i % 2]!.gatewayUrl, `Bearer ${key}`)).status);
      expect(statuses).toEqual(Array(40).fill(200));
    }, 60_000);

    it('a slot freed on one instance reaches Redis with no further request there, so the other instance admits', async () => {
      const { key } = await a.keyService.create({
        name: 'handed-over',
        plan: 'gated',
        limits: { perMinute: 1000, perDay: 100_000, maxInFlight: 1 },
      });
      inventory.open();
      expect((await get(a.gatewayUrl, `Bearer ${key}`)).status).toBe(200);
      // Instance a sends nothing more for this key: its release goes on its own (maxInFlight 1: at once), and b sees the slot free.
      await eventually(async () => (await get(b.gatewayUrl, `Bearer ${key}`)).status === 200, {
        timeoutMs: 10_000,
        what: "b admits once a's release is in Redis",
      });
    }, 60_000);

    it(`the slots of an instance killed with SIGKILL come back within upstream.timeoutMs + 5 s`, async () => {
      const { key } = await a.keyService.create({ name: 'orphaned', plan: 'gated' });
      const auth = `Bearer ${key}`;
      const env = await isolatedEnv({
        APP_ENV: 'development',
        ADMIN_TOKEN: LONG_ADMIN_TOKEN,
        SIGNING_SECRET: LONG_SIGNING_SECRET,
        REDIS_URL: testRedisUrl(),
        INVENTORY_URL: inventory.url,
        CONFIG_FILE: tempFile(
          'inflight.yaml',
          JSON.stringify({
            plans: PLANS,
            redis: { namespace, commandTimeoutMs: 2000 },
            upstream: { timeoutMs: TIMEOUT_MS },
          }),
        ),
      });
      main = startMain(env);
      await main.waitForStdout(/"msg":"listening/, 30_000);
      const doomedUrl = `http://127.0.0.1:${env.PORT}`;
      inventory.shut();
      // The doomed instance takes all five slots (its requests wait on the inventory), then dies without releasing them.
      const doomed = Array.from({ length: MAX_IN_FLIGHT }, () => get(doomedUrl, auth).catch(() => null));
      await eventually(() => inventory.held === MAX_IN_FLIGHT, {
        timeoutMs: 15_000,
        what: 'the doomed instance holds every slot',
      });
      main.child.kill('SIGKILL');
      const killedAt = Date.now();
      await main.exited;
      await Promise.all(doomed);
      inventory.open();
      expect(await get(a.gatewayUrl, auth)).toMatchObject({ status: 429, code: 'concurrency_limited' });
      let freedAfterMs = 0;
      await eventually(
        async () => (await get(a.gatewayUrl, auth)).status === 200 && (freedAfterMs = Date.now() - killedAt) > 0,
        { timeoutMs: TIMEOUT_MS + 5000 + 2000, what: 'a slot is free again' },
      );
      expect(freedAfterMs).toBeLessThanOrEqual(TIMEOUT_MS + 5000);
    }, 90_000);
  });

  describe('in process', () => {
    let product: ProductHarness;
    beforeAll(async () => {
      product = await startTestProduct({ redis: false, overrides: overrides(inventory.url) });
    });
    afterAll(async () => {
      await product?.close();
    });

    it(`admits exactly ${MAX_IN_FLIGHT} of ${CONCURRENT} on one instance, and a key's own limits.maxInFlight wins over its plan's`, async () => {
      const { key } = await product.keyService.create({ name: 'gated', plan: 'gated' });
      expectExactlyTheLimit(await burst([product], `Bearer ${key}`));
      const own = await product.keyService.create({
        name: 'own',
        plan: 'gated',
        limits: { perMinute: 1000, perDay: 100_000, maxInFlight: 2 },
      });
      inventory.shut();
      const replies = await Promise.all([
        get(product.gatewayUrl, `Bearer ${own.key}`),
        get(product.gatewayUrl, `Bearer ${own.key}`),
        (async () => {
          await eventually(() => inventory.held === 2, { timeoutMs: 15_000, what: 'two held' });
          const third = await get(product.gatewayUrl, `Bearer ${own.key}`);
          inventory.open();
          return third;
        })(),
      ]);
      expect(replies.map((reply) => reply.status)).toEqual([200, 200, 429]);
    }, 60_000);
  });
});
