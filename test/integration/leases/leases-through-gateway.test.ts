import Redis from 'ioredis';
import { startTestProduct, usageOf, type ProductHarness } from '../gateway/gateway-kit';
import { createKey } from '../../support/keys';
import { useRedisPerFile } from '../../support/redis-per-file';
import { commandsExecuted } from '../../support/redis-command-count';
import { awayFromMinuteEnd } from '../../support/minute-end';

/**
 * Leases of units through the gateway (real HTTP, a Redis of this file's own): a hot key is admitted
 * from leases, its headers count down by each request exactly (one instance serves it: no
 * under-admission), and the admin API's usage shows what requests used.
 */
const redis = useRedisPerFile();
let product: ProductHarness;
let observer: Redis;

beforeAll(async () => {
  observer = new Redis(redis.url);
  product = await startTestProduct({
    redisUrl: redis.url,
    overrides: { rateLimit: { leases: { enabled: true, busyRequestsPerSecond: 20 } } },
  });
});

afterAll(async () => {
  await product?.close();
  observer?.disconnect();
});

/** Scripts Redis ran (EVALSHA, EVAL): the gateway's round trips for decisions, and a few of its background writes. */
async function scriptsRun(): Promise<number> {
  const info = await observer.info('commandstats');
  const calls = (name: string) => Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  return calls('evalsha') + calls('eval');
}

async function leaseAdmissions(): Promise<{ lease: number; store: number; usedUnits: number; takenUnits: number }> {
  const text = await (await fetch(`${product.adminUrl}/metrics`)).text();
  const read = (metric: string, label: string, value: string) =>
    Number(new RegExp(`^${metric}\\{${label}="${value}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return {
    lease: read('gateway_lease_admissions_total', 'decided_by', 'lease'),
    store: read('gateway_lease_admissions_total', 'decided_by', 'store'),
    usedUnits: read('gateway_lease_units_total', 'outcome', 'used'),
    takenUnits: read('gateway_lease_units_total', 'outcome', 'taken'),
  };
}

/** `count` requests of `auth`, `concurrency` at a time; each answer's status and X-RateLimit-Remaining, in order. */
async function send(
  auth: string,
  count: number,
  concurrency: number,
): Promise<Array<{ status: number; remaining: number }>> {
  const answers: Array<{ status: number; remaining: number }> = [];
  for (let sent = 0; sent < count; sent += concurrency) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(concurrency, count - sent) }, async () => {
        const res = await fetch(`${product.gatewayUrl}/v1/pets?limit=1`, { headers: { authorization: auth } });
        await res.arrayBuffer();
        return { status: res.status, remaining: Number(res.headers.get('x-ratelimit-remaining')) };
      }),
    );
    answers.push(...batch);
  }
  return answers;
}

test('a hot key is served from leases: most requests with no Redis round trip, headers exact, usage what was used', async () => {
  const limits = { perMinute: 1_000_000, perDay: 10_000_000 };
  const { id, auth } = await createKey(product, { name: 'hot', plan: 'enterprise', limits }, { overApi: true });
  await awayFromMinuteEnd(25_000);
  const warm = await send(auth, 200, 4);
  const before = {
    commands: await commandsExecuted(observer),
    scripts: await scriptsRun(),
    admissions: await leaseAdmissions(),
  };
  const startedAt = Date.now();
  const answers = await send(auth, 2_000, 4);
  const perSecond = 2_000 / ((Date.now() - startedAt) / 1_000);
  const commands = (await commandsExecuted(observer)) - before.commands;
  const scripts = (await scriptsRun()) - before.scripts;
  const after = await leaseAdmissions();
  const fromLease = after.lease - before.admissions.lease;
  const byStore = after.store - before.admissions.store;
  console.log(
    `through the gateway at ${Math.round(perSecond)} requests/s: ${fromLease} admitted from leases, ${byStore} by Redis; for 2,000 admitted ${scripts} scripts ` +
      `(${(scripts / 2_000).toFixed(4)} each) and ${commands} Redis commands (${(commands / 2_000).toFixed(3)} each), the gateway's background included`,
  );
  expect(answers.every((a) => a.status === 200)).toBe(true);
  // Redis decides a request once per lease (200 ms of the rate this instance saw: a slower machine
  // takes smaller leases, so the bound follows the measured rate, not a fixed share) and for the odd
  // request that finds its lease spent; every other request is admitted from a lease.
  const leases = 2_000 / Math.max(2, Math.floor(perSecond * 0.2));
  expect(perSecond).toBeGreaterThan(20); // the busy threshold this product is configured with
  expect(byStore).toBeLessThanOrEqual(2 * leases + 10);
  expect(fromLease + byStore).toBe(2_000);
  // Every request admitted from a lease used one unit of it (cost 1), and a lease took them first.
  expect(after.usedUnits).toBe(after.lease);
  expect(after.takenUnits).toBeGreaterThanOrEqual(after.usedUnits);
  // Round trips: a take per lease (200 ms of the rate; a slower machine takes smaller ones), the odd
  // request that finds its lease spent, and a few background scripts. 400 requests/s: 0.02 at most.
  expect(scripts).toBeLessThanOrEqual(2 * leases + 10);
  // One instance serves the key: what its headers show falls by exactly one per request, from lease or Redis.
  const shown = [...warm, ...answers].map((a) => a.remaining).sort((x, y) => y - x);
  expect(shown.every((r, i) => i === 0 || r === shown[i - 1]! - 1)).toBe(true);
  // The admin API's usage counts what requests used, this instance's lease not.
  const usage = await usageOf(product, id);
  expect(limits.perMinute - usage.minute.remaining).toBe(2_200);
});

/** `clients` concurrent clients, each sending until its first refusal: every status, in order of answer. */
async function untilEachRefused(auth: string, clients: number): Promise<number[]> {
  const statuses: number[] = [];
  const client = async () => {
    for (;;) {
      const res = await fetch(`${product.gatewayUrl}/v1/pets?limit=1`, { headers: { authorization: auth } });
      await res.arrayBuffer();
      statuses.push(res.status);
      if (res.status !== 200) return;
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  return statuses;
}

test('no under-admission when one instance serves the key: concurrent clients until refused, exactly the limit admitted, most from leases', async () => {
  const limits = { perMinute: 600, perDay: 100_000 };
  const { auth } = await createKey(product, { name: 'filled', plan: 'enterprise', limits }, { overApi: true });
  await awayFromMinuteEnd(15_000);
  const before = await leaseAdmissions();
  const statuses = await untilEachRefused(auth, 8);
  const after = await leaseAdmissions();
  const fromLease = after.lease - before.lease;
  const byStore = after.store - before.store;
  console.log(
    `one instance, limit 600: ${fromLease} admitted from leases, ${byStore} by Redis; answers ${statuses.length}`,
  );
  // Its own lease is spent or given back before Redis refuses it anything: no unit sits unused.
  expect(statuses.filter((status) => status === 200)).toHaveLength(limits.perMinute);
  expect(statuses.filter((status) => status !== 200).every((status) => status === 429)).toBe(true);
  expect(fromLease + byStore).toBe(limits.perMinute);
  expect(fromLease).toBeGreaterThan(0);
});
