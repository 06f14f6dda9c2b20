import { ManualClock } from '../../../../src/shared/clock';
import { LeasingKeyLimiter } from '../../../../src/limits/leases/leasing-key-limiter';
import { LEASE_LIFE_MS } from '../../../../src/limits/leases/lease-settings';
import type { KeyDecision, WindowLimits } from '../../../../src/limits/types';
import { FakeLeaseStore } from './fake-lease-store';
import { STORE_NOW } from './lease-kit';
import { eventually } from '../../../support/eventually';

const KEY = { keyId: 'key_1' };
const ROOMY: WindowLimits = { perMinute: 100_000, perDay: 1_000_000 };

function setUp(enabled = true, sweepMs = 3_600_000) {
  const clock = new ManualClock(STORE_NOW);
  const store = new FakeLeaseStore(clock);
  const switchOn = { enabled };
  const limiter = new LeasingKeyLimiter(store, { clock, enabled: () => switchOn.enabled, sweepMs });
  return { clock, store, limiter, switchOn };
}

/** `count` requests of the key, one every `everyMs`, each decided before the next. */
async function send(
  limiter: LeasingKeyLimiter,
  clock: ManualClock,
  count: number,
  everyMs: number,
  limits = ROOMY,
  cost = 1,
): Promise<KeyDecision[]> {
  const decisions: KeyDecision[] = [];
  for (let i = 0; i < count; i++) {
    decisions.push(await limiter.consume(KEY, limits, { cost }));
    clock.advance(everyMs);
  }
  return decisions;
}

/** Requests at 200/s until the key holds a lease with at least 5 units left; how many were sent. */
async function warm(limiter: LeasingKeyLimiter, clock: ManualClock): Promise<number> {
  for (let sent = 1; sent <= 500; sent++) {
    await limiter.consume(KEY, ROOMY);
    clock.advance(5);
    if (limiter.book.outstandingUnits() >= 5) return sent;
  }
  throw new Error('no lease after 500 requests');
}

function expectUnitsAccounted(limiter: LeasingKeyLimiter): void {
  const c = limiter.book.counts.snapshot();
  expect(c.taken).toBe(c.used + c.returned + c.expired + limiter.book.outstandingUnits());
}

describe('LeasingKeyLimiter', () => {
  it('a key that comes in bursts once a second keeps leases of a burst: a few takes a burst, not one per few requests', async () => {
    const { clock, store, limiter } = setUp(true, LEASE_LIFE_MS);
    const burst = async () => {
      // 600 requests in 150 ms (4,000/s), then 850 ms of nothing, the ended lease swept.
      const decisions = await send(limiter, clock, 600, 0.25);
      clock.advance(850);
      await limiter.sweep();
      return decisions;
    };
    await burst();
    await burst();
    const tripsBefore = store.roundTrips;
    const decisions = await burst();
    const takes = store.roundTrips - tripsBefore;
    expect(decisions.every((d) => d.outcome === 'allowed')).toBe(true);
    // A lease of 200 ms of the burst's busiest quarter second covers most of it. Sized from the last
    // second's rate instead (the previous burst 0.85 s old, mostly out of it; busy again only after 50
    // requests), this burst cost 64 round trips.
    expect(takes).toBeLessThanOrEqual(3);
    await limiter.close();
    expect(store.minute.count).toBe(1_800);
  });

  it('serves a busy key from leases: one round trip for many requests, and the store counts what was used once leases end', async () => {
    const { clock, store, limiter } = setUp();
    const decisions = await send(limiter, clock, 1_000, 5); // 200 requests/s for 5 s
    expect(decisions.every((d) => d.outcome === 'allowed')).toBe(true);
    expect(limiter.admissions.lease).toBeGreaterThan(800);
    expect(store.roundTrips / 1_000).toBeLessThan(0.1);
    await limiter.close();
    expect(store.minute.count).toBe(1_000);
    expect(limiter.book.counts.get('used')).toBe(limiter.admissions.lease);
    expectUnitsAccounted(limiter);
  });

  it('takes no lease for a key that is not busy here: every request to the store', async () => {
    const { clock, store, limiter } = setUp();
    await send(limiter, clock, 100, 50); // 20 requests/s
    expect(store.roundTrips).toBe(100);
    expect(limiter.admissions.lease).toBe(0);
  });

  it('near the limit grants no lease, and every refusal is the store’s: exactly the limit admitted', async () => {
    const { clock, store, limiter } = setUp();
    const limits = { perMinute: 300, perDay: 10_000 };
    const decisions = await send(limiter, clock, 400, 5, limits);
    // Leases while there was room (a lease returns what it holds when it cannot admit, before the store decides).
    expect(limiter.admissions.lease).toBeGreaterThan(0);
    expect(decisions.filter((d) => d.outcome === 'allowed')).toHaveLength(300);
    expect(store.refusals).toBe(100);
    await limiter.close();
    expect(store.minute.count).toBe(300);
    expectUnitsAccounted(limiter);
  });

  it('grants nothing when fewer than 16 units are left (two requests, 1/8): each request to the store', async () => {
    const { clock, store, limiter } = setUp();
    const limits = { perMinute: 60, perDay: 1_000 };
    await send(limiter, clock, 100, 5, limits);
    expect(store.roundTrips).toBe(100);
    expect(limiter.admissions.lease).toBe(0);
  });

  it('shows the request that took a lease the windows as used, and names the units it counted besides', async () => {
    const { clock, limiter } = setUp();
    const decisions = await send(limiter, clock, 60, 5);
    const take = decisions.find((d) => d.outcome === 'allowed' && d.leaseUnits !== undefined);
    expect(take).toBeDefined();
    const index = decisions.indexOf(take!);
    expect(take!.outcome === 'allowed' && take!.minute.remaining).toBe(ROOMY.perMinute - (index + 1));
    const next = decisions[index + 1]!;
    expect(next).toMatchObject({ outcome: 'allowed', fromLease: true });
    expect(next.outcome === 'allowed' && next.minute.remaining).toBe(ROOMY.perMinute - (index + 2));
  });

  it('gives a lease’s unused units back when it ends by expiry with no next request (the sweep)', async () => {
    const { clock, store, limiter } = setUp();
    const used = await warm(limiter, clock);
    expect(limiter.book.size).toBe(1);
    expect(store.minute.count).toBeGreaterThan(used);
    clock.advance(LEASE_LIFE_MS);
    await limiter.sweep();
    expect(limiter.book.size).toBe(0);
    expect(store.minute.count).toBe(used);
    expect(limiter.book.counts.get('returned')).toBeGreaterThan(0);
    expectUnitsAccounted(limiter);
  });

  it('sweeps by itself while a lease is out, and stops once none is left', async () => {
    const { clock, store, limiter } = setUp(true, 5);
    const used = await warm(limiter, clock);
    clock.advance(LEASE_LIFE_MS);
    const swept = () => limiter.book.size === 0 && store.minute.count === used;
    await eventually(() => swept() && limiter['timer'] === undefined, {
      what: 'the lease swept back, the sweep stopped',
    });
    await limiter.close();
  });

  it('answers a usage read with this instance’s unused lease units not counted as used', async () => {
    const { clock, store, limiter } = setUp();
    const sent = await warm(limiter, clock);
    expect(store.minute.count).toBeGreaterThan(sent);
    const usage = await limiter.usage(KEY, ROOMY);
    expect(ROOMY.perMinute - usage.minute.remaining).toBe(sent);
    expect(ROOMY.perDay - usage.day.remaining).toBe(sent);
  });

  it('lets requests that arrive while the key’s lease is being taken wait for it: no round trip of their own', async () => {
    const { clock, store, limiter } = setUp();
    await warm(limiter, clock);
    clock.advance(LEASE_LIFE_MS); // the lease has ended: the next request takes another
    await limiter.sweep();
    const trips = store.roundTrips;
    const decisions = await Promise.all(Array.from({ length: 10 }, () => limiter.consume(KEY, ROOMY)));
    expect(decisions.every((d) => d.outcome === 'allowed')).toBe(true);
    expect(store.roundTrips).toBe(trips + 1);
    expect(decisions.filter((d) => d.outcome === 'allowed' && d.fromLease)).toHaveLength(9);
  });

  it('carries the return of a lease that cannot hold a request in that request’s own round trip', async () => {
    const { clock, store, limiter } = setUp();
    const sent = await warm(limiter, clock);
    const trips = store.roundTrips;
    const left = limiter.book.outstandingUnits();
    expect(left).toBeGreaterThan(1);
    // A request of more units than the lease holds: one round trip, the return with it.
    await limiter.consume(KEY, ROOMY, { cost: left + 1 });
    expect(store.roundTrips).toBe(trips + 1);
    await limiter.close();
    expect(store.minute.count).toBe(sent + left + 1);
    expectUnitsAccounted(limiter);
  });

  it('leaves shadowed keys, keys with maxInFlight and a switched-off limiter on the per-request path', async () => {
    const { clock, store, limiter, switchOn } = setUp();
    for (let i = 0; i < 100; i++) {
      await limiter.consume(KEY, ROOMY, { shadow: true });
      await limiter.consume(KEY, ROOMY, { inFlight: { max: 10, id: String(i), ttlMs: 1000 } });
      clock.advance(5);
    }
    expect(store.roundTrips).toBe(200);
    const sent = await warm(limiter, clock);
    expect(limiter.book.size).toBe(1);
    switchOn.enabled = false;
    const trips = store.roundTrips;
    await send(limiter, clock, 20, 5);
    expect(store.roundTrips).toBe(trips + 20);
    expect(limiter.book.size).toBe(0);
    await limiter.sweep();
    expect(store.minute.count).toBe(200 + sent + 20);
  });

  it('keeps admitting from units already counted while the store is down; their return fails and counts as expired', async () => {
    const { clock, store, limiter } = setUp();
    await warm(limiter, clock);
    const left = limiter.book.outstandingUnits();
    store.down = true;
    const decisions = await send(limiter, clock, Math.min(left, 5), 1);
    expect(decisions.every((d) => d.outcome === 'allowed' && d.fromLease)).toBe(true);
    clock.advance(LEASE_LIFE_MS);
    await limiter.sweep();
    expect(limiter.book.counts.get('expired')).toBe(left - decisions.length);
    expectUnitsAccounted(limiter);
  });

  it('ends a key’s lease on a window reset with nothing given back (the reset window does not hold its units)', async () => {
    const { clock, store, limiter } = setUp();
    await warm(limiter, clock);
    await limiter.resetWindows(KEY, ['minute']);
    await limiter.sweep();
    expect(store.minute.count).toBe(0);
    expect(limiter.book.size).toBe(0);
    expectUnitsAccounted(limiter);
  });
});
