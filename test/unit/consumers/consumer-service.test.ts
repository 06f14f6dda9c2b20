import { ManualClock } from '../../../src/shared/clock';
import { ConsumerService } from '../../../src/consumers/consumer-service';
import { encodeConsumer } from '../../../src/consumers/consumer-record';
import type { ConsumerShare, ConsumerWindows } from '../../../src/limits/types';
import { KeyLimiterFake } from '../limits/key-limiter-fake';
import { consumerRecord, MemoryConsumerStore } from './consumer-kit';

/**
 * ConsumerService's rules (src/consumers/consumer-service.ts) over a consumer store held in memory:
 * what a create, a change and a backup line must be (limits against the costs in force, the name,
 * instants), what a PATCH leaves alone, and credits on a consumer without a month. The admin
 * routes on real stores: test/integration/consumers/consumers-admin.test.ts.
 */

const NOW = Date.UTC(2026, 2, 10, 12);

class UsageLimiter extends KeyLimiterFake {
  readonly credits: Array<[string, number]> = [];
  override async consumerUsage(consumer: ConsumerShare): Promise<ConsumerWindows> {
    return { day: { limit: consumer.limits.perDay ?? 0, remaining: 1, resetAt: NOW } } as unknown as ConsumerWindows;
  }
  override async addConsumerCredits(consumer: ConsumerShare, units: number): Promise<void> {
    this.credits.push([consumer.id, units]);
  }
}

function setUp(costs = [{ method: 'POST', path: '/v1/orders', cost: 5 }]) {
  const store = new MemoryConsumerStore();
  const clock = new ManualClock(NOW);
  const limiter = new UsageLimiter();
  const service = new ConsumerService({
    store,
    keys: { list: async () => [] },
    keyLimiter: limiter,
    clock,
    costs: () => costs,
  });
  return { store, clock, limiter, service };
}

test('a create: a new id, the name trimmed, limits in one order, billing day 1 by default, both instants now, stored', async () => {
  const { service, store } = setUp();
  const created = await service.create({ name: '  Acme  ', limits: { perDay: 100, perMinute: 10 } });
  expect(created).toMatchObject({
    name: 'Acme',
    billingDay: 1,
    allowedOperations: null,
    allowedAddresses: null,
    createdAt: new Date(NOW).toISOString(),
    updatedAt: new Date(NOW).toISOString(),
  });
  expect(JSON.stringify(created.limits)).toBe('{"perMinute":10,"perDay":100}');
  expect(store.byId.get(created.id)).toEqual(created);
});

test.each([
  [{ name: ' ' }, /name must be 1 to/],
  [{ name: 'x'.repeat(201) }, /name must be 1 to/],
  [{ name: 'a', limits: { perMinute: 4 } }, /below the largest operation cost 5 .*perMinute is 4/],
  [{ name: 'a', allowedOperations: ['GET /nowhere'] }, /allowedOperations/],
  [{ name: 'a', allowedAddresses: ['not an address'] }, /allowedAddresses/],
])('a create of %j is refused 400 (%s) and nothing is stored', async (input, message) => {
  const { service, store } = setUp();
  await expect(service.create(input)).rejects.toMatchObject({ code: 'validation_failed', message });
  expect(store.byId.size).toBe(0);
});

test('a limit equal to the largest cost is enough; without costs in force, any positive limit', async () => {
  await expect(setUp().service.create({ name: 'a', limits: { perMinute: 5 } })).resolves.toBeDefined();
  await expect(setUp([]).service.create({ name: 'a', limits: { perMinute: 1 } })).resolves.toBeDefined();
});

test('a PATCH changes what it names: absent fields stay, limits null removes every limit, billingDay null is day 1', async () => {
  const { service, clock } = setUp();
  const created = await service.create({
    name: 'Acme',
    limits: { perDay: 100 },
    billingDay: 12,
    allowedAddresses: ['10.0.0.0/8'],
  });
  clock.advance(60_000);
  const renamed = await service.update(created.id, { name: 'Acme Ltd' });
  expect(renamed).toMatchObject({
    name: 'Acme Ltd',
    limits: { perDay: 100 },
    billingDay: 12,
    allowedAddresses: ['10.0.0.0/8'],
    createdAt: created.createdAt,
    updatedAt: new Date(NOW + 60_000).toISOString(),
  });
  const cleared = await service.update(created.id, { limits: null, billingDay: null, allowedAddresses: null });
  expect(cleared).toMatchObject({ name: 'Acme Ltd', limits: {}, billingDay: 1, allowedAddresses: null });
  expect(await service.update('con_' + 'f'.repeat(24), { name: 'x' })).toBeNull();
  await expect(service.update(created.id, { limits: { perDay: 1 } })).rejects.toMatchObject({
    code: 'validation_failed',
  });
  expect((await service.get(created.id))!.limits).toEqual({});
});

test('a backup line is checked as a create is, and its instants must exist and not lie ahead', () => {
  const { service } = setUp();
  const line = JSON.parse(encodeConsumer(consumerRecord({ limits: { perDay: 50 } }))) as Record<string, unknown>;
  expect(encodeConsumer(service.fromBackup(line))).toBe(encodeConsumer(line as never));
  // Normalised to ISO UTC; a few minutes of another clock's skew are taken.
  expect(service.fromBackup({ ...line, createdAt: '2026-03-10T13:00:00+01:00' }).createdAt).toBe(
    '2026-03-10T12:00:00.000Z',
  );
  expect(service.fromBackup({ ...line, updatedAt: new Date(NOW + 4 * 60_000).toISOString() })).toBeDefined();
  const refusals: Array<[Record<string, unknown>, RegExp]> = [
    [{ updatedAt: new Date(NOW + 6 * 60_000).toISOString() }, /updatedAt .* is in the future/],
    [{ createdAt: '2026-02-30T00:00:00Z' }, /createdAt must be an RFC 3339 instant/],
    [{ limits: { perDay: 2 } }, /below the largest operation cost/],
    [{ id: 'con_1' }, /^id: must be con_ and 24 hex digits$/],
    [{ plan: 'pro' }, /plan/],
  ];
  for (const [change, message] of refusals) expect(() => service.fromBackup({ ...line, ...change })).toThrow(message);
});

test('usage and credits: a consumer without limits has no windows; credits need a month window (409), else go to its month', async () => {
  const { service, limiter } = setUp([]);
  const none = await service.create({ name: 'free' });
  expect(await service.usage(none)).toEqual({});
  await expect(service.addCredits(none, 5)).rejects.toMatchObject({ code: 'conflict' });
  const daily = await service.create({ name: 'daily', limits: { perDay: 10 } });
  expect(await service.usage(daily)).toEqual({ day: { limit: 10, remaining: 1, resetAt: NOW } });
  await expect(service.addCredits(daily, 5)).rejects.toMatchObject({ code: 'conflict' });
  const monthly = await service.create({ name: 'monthly', limits: { perMonth: 1000 } });
  expect(await service.addCredits(monthly, 5)).toEqual({ day: { limit: 0, remaining: 1, resetAt: NOW } });
  expect(limiter.credits).toEqual([[monthly.id, 5]]);
});

test('delete: false for an unknown consumer, without asking the keys', async () => {
  const { service, store } = setUp();
  expect(await service.delete('con_' + 'f'.repeat(24))).toBe(false);
  const created = await service.create({ name: 'a' });
  expect(await service.delete(created.id)).toBe(true);
  expect(store.byId.has(created.id)).toBe(false);
});
