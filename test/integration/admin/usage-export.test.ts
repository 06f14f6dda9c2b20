import { ManualClock } from '../../../src/shared/clock';
import { dayOf } from '../../../src/usage/key-activity';
import type { UsageExportLine } from '../../../src/usage/usage-export';
import { uniqueNamespace } from '../../support/test-redis';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { adminRequest } from './admin-kit';
import { eventually } from '../../support/eventually';
import { expectError } from '../../support/errors';

/**
 * Issue 40, GET /admin/usage/export on Redis with two instances: one line per key and UTC day with
 * traffic, whose `units` is what the key's day window counted (costs included), exactly.
 */

jest.setTimeout(60_000);

const DAY_MS = 86_400_000;
const COSTS = [{ method: 'POST', path: '/pets', cost: 3 }];
let clock: ManualClock;
let a: ProductHarness;
let b: ProductHarness;

beforeAll(async () => {
  // Mid-day, so what the test sends stays on one UTC day until it moves the clock on.
  clock = new ManualClock(Date.UTC(2026, 2, 10, 12, 0, 0));
  const namespace = uniqueNamespace('usage-export');
  // 10 s command timeout: the premise is a Redis that answers (exact counts over two instances);
  // at load 20-27 the 2 s of the harness timed out in the product's own start ("Redis is unreachable").
  const redis = { commandTimeoutMs: 10_000 };
  a = await startTestProduct({ namespace, clock, overrides: { costs: COSTS, redis } });
  b = await startTestProduct({
    namespace,
    clock,
    overrides: { costs: COSTS, redis, upstream: { url: a.inventory!.url } },
  });
});

afterAll(async () => {
  await b?.close();
  await a?.close();
});

type Line = UsageExportLine;

async function exportOf(product: ProductHarness, from: string, to: string): Promise<Line[]> {
  const res = await adminRequest(product, 'get', `/admin/usage/export?from=${from}&to=${to}`)
    .buffer(true)
    .parse((r, done) => {
      let text = '';
      r.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      r.on('end', () => done(null, text));
    });
  expect({ status: res.status, type: res.headers['content-type'] }).toEqual({
    status: 200,
    type: 'application/x-ndjson; charset=utf-8',
  });
  const text = res.body as string;
  expect(text === '' || text.endsWith('\n')).toBe(true);
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Line);
}

async function send(product: ProductHarness, key: string, method: 'GET' | 'POST'): Promise<number> {
  const res = await fetch(`${product.gatewayUrl}/v1/pets`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: method === 'POST' ? JSON.stringify({ name: 'Rex', categoryId: 1 }) : undefined,
  });
  await res.arrayBuffer();
  return res.status;
}

/** What the key's day window has counted, as GET /admin/keys/{id} shows it. */
async function dayWindowCount(id: string): Promise<number> {
  const { usage } = (await adminRequest(a, 'get', `/admin/keys/${id}`).expect(200)).body as {
    usage: { day: { limit: number; remaining: number } };
  };
  return usage.day.limit - usage.day.remaining;
}

const date = (ms: number) => new Date(ms).toISOString().slice(0, 10);

test("units equal the day window's count over two instances, costs included; admitted and refusals as answered", async () => {
  const { key, record } = await a.keyService.create({
    name: 'metered',
    plan: 'free',
    limits: { perMinute: 100, perDay: 20 },
  });
  const statuses: number[] = [];
  // 4 POSTs (3 units each) and 10 GETs over both instances: 20 units fit, the rest is refused.
  for (let i = 0; i < 14; i++) statuses.push(await send(i % 2 === 0 ? a : b, key, i < 4 ? 'POST' : 'GET'));
  const admitted = statuses.filter((s) => s < 300).length;
  const refused = statuses.filter((s) => s === 429).length;
  expect({ admitted, refused }).toEqual({ admitted: 12, refused: 2 });
  expect(await dayWindowCount(record.id)).toBe(20);

  // B flushes every 5 s; the export (on A) flushes A's own counts at once.
  const today = date(clock.now());
  let lines: Line[] = [];
  await eventually(
    async () => {
      lines = (await exportOf(a, today, today)).filter((l) => l.keyId === record.id);
      return lines[0]?.admitted === admitted;
    },
    { timeoutMs: 20_000 },
  );
  expect(lines).toEqual([
    { date: today, keyId: record.id, consumerId: null, admitted, units: 20, rateLimited: refused, banned: 0 },
  ]);
});

test('one line per key and UTC day with traffic, oldest first; keys without traffic have none', async () => {
  const busy = await a.keyService.create({ name: 'two days', plan: 'free', limits: { perMinute: 100, perDay: 100 } });
  await a.keyService.create({ name: 'idle', plan: 'free' });
  const firstDay = clock.now();
  expect(await send(a, busy.key, 'POST')).toBe(201);
  clock.advance(DAY_MS);
  for (let i = 0; i < 2; i++) expect(await send(a, busy.key, 'GET')).toBe(200);
  const secondDay = clock.now();

  const lines = (await exportOf(a, date(firstDay - DAY_MS), date(secondDay))).filter((l) => l.keyId === busy.record.id);
  expect(lines).toEqual([
    { date: date(firstDay), keyId: busy.record.id, consumerId: null, admitted: 1, units: 3, rateLimited: 0, banned: 0 },
    {
      date: date(secondDay),
      keyId: busy.record.id,
      consumerId: null,
      admitted: 2,
      units: 2,
      rateLimited: 0,
      banned: 0,
    },
  ]);
  // Only keys with traffic in the range: the idle key has no line.
  const all = await exportOf(a, date(firstDay - DAY_MS), date(secondDay));
  expect(all.every((l) => l.admitted + l.rateLimited + l.banned + l.units > 0)).toBe(true);
  // A range of one day holds that day only.
  expect(
    (await exportOf(a, date(secondDay), date(secondDay))).filter((l) => l.keyId === busy.record.id).map((l) => l.date),
  ).toEqual([date(secondDay)]);
  expect(dayOf(secondDay) - dayOf(firstDay)).toBe(1);
});

test.each([
  ['no from', '?to=2026-03-10', 'from is required: a UTC date, YYYY-MM-DD.'],
  ['no to', '?from=2026-03-10', 'to is required: a UTC date, YYYY-MM-DD.'],
  ['a malformed from', '?from=20260310&to=2026-03-10', 'from must be a UTC date, YYYY-MM-DD.'],
  ['a month 13', '?from=2026-13-01&to=2026-03-10', 'from must be a UTC date, YYYY-MM-DD.'],
  ['30 February', '?from=2026-02-01&to=2026-02-30', 'to must be a UTC date, YYYY-MM-DD.'],
  ['a from given twice', '?from=2026-03-01&from=2026-03-02&to=2026-03-10', 'from must be a UTC date, YYYY-MM-DD.'],
  ['to before from', '?from=2026-03-10&to=2026-03-09', 'to must not be before from.'],
  ['401 days', '?from=2025-03-01&to=2026-04-05', 'from..to spans at most 400 days.'],
])('%s: 400 invalid_parameter with the Error body', async (_name, query, message) => {
  const res = await adminRequest(a, 'get', `/admin/usage/export${query}`);
  expectError(res, 400, 'invalid_parameter');
  expect((res.body as { message: string }).message).toBe(message);
});

test('400 days are accepted; without the admin token: 401', async () => {
  expect((await adminRequest(a, 'get', '/admin/usage/export?from=2025-02-04&to=2026-03-10')).status).toBe(200);
  const res = await fetch(new URL('/admin/usage/export?from=2026-03-10&to=2026-03-10', a.adminUrl));
  expect(res.status).toBe(401);
});
