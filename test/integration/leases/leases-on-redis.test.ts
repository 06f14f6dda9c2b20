import Redis from 'ioredis';
import { ManualClock } from '../../../src/shared/clock';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { RedisKeyLimiter } from '../../../src/limits/redis/redis-key-limiter';
import { LeasingKeyLimiter } from '../../../src/limits/leases/leasing-key-limiter';
import { LEASE_LIFE_MS } from '../../../src/limits/leases/lease-settings';
import type { LeaseGrant, LeaseReturn } from '../../../src/limits/leases/lease';
import type { ConsumeOptions, ConsumerShare, KeyDecision, KeyRef, WindowLimits } from '../../../src/limits/types';
import { uniqueNamespace } from '../../support/test-redis';
import { useRedisPerFile } from '../../support/redis-per-file';
import { commandsExecuted } from '../../support/redis-command-count';

/**
 * Leases of units on a real Redis (docs/scaling.md "Leases"): the lease consume and return scripts
 * under the leasing limiter, on an injected clock (Redis decides on the clock's `now`, so a
 * simulated rate costs no waiting). Commands are Redis's own account (INFO commandstats: EVALSHA
 * and every command a script runs).
 */
const redis = useRedisPerFile();
const BAN = { threshold: 1_000_000, windowSeconds: 60, durationSeconds: 60 };
/** 2026-03-02 10:00:05 UTC: 55 s left in the minute. */
const START = Date.UTC(2026, 2, 2, 10, 0, 5);

const clients: RedisClient[] = [];
let observer: Redis;

beforeAll(async () => {
  observer = new Redis(redis.url);
});

afterAll(async () => {
  for (const client of clients) await client.quit();
  observer.disconnect();
});

async function instance(namespace: string, clock: ManualClock) {
  const client = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 });
  clients.push(client);
  const store = new RedisKeyLimiter(client, { namespace, ban: BAN, clock });
  return { store, leasing: new LeasingKeyLimiter(store, { clock, enabled: () => true, sweepMs: 3_600_000 }) };
}

async function evalshaCalls(): Promise<number> {
  const info = await observer.info('commandstats');
  const evalsha = /^cmdstat_evalsha:calls=(\d+)/m.exec(info);
  const evals = /^cmdstat_eval:calls=(\d+)/m.exec(info);
  return Number(evalsha?.[1] ?? 0) + Number(evals?.[1] ?? 0);
}

/** `count` requests, one every `everyMs` of the clock, over the instances in turn. */
async function send(
  limiters: LeasingKeyLimiter[],
  clock: ManualClock,
  key: KeyRef,
  limits: WindowLimits,
  count: number,
  everyMs: number,
  options?: ConsumeOptions,
): Promise<KeyDecision[]> {
  const decisions: KeyDecision[] = [];
  for (let i = 0; i < count; i++) {
    decisions.push(await limiters[i % limiters.length]!.consume(key, limits, options));
    clock.advance(everyMs);
  }
  return decisions;
}

/** The return of a whole unused lease of a key of no consumer, every window still open. */
function wholeReturn(holder: KeyRef, grant: LeaseGrant): LeaseReturn {
  return {
    holder,
    units: grant.units,
    windows: grant.windows,
    complete: true,
    takenAt: grant.storeNow,
    granted: grant.units,
    inConsumerWindows: false,
  };
}

const admitted = (decisions: KeyDecision[]) => decisions.filter((d) => d.outcome === 'allowed').length;

describe('leases on a real Redis', () => {
  it('serves a hot key from leases: Redis commands and round trips per admitted request far under one', async () => {
    const clock = new ManualClock(START);
    const { store, leasing } = await instance(uniqueNamespace('lz'), clock);
    const key = { keyId: 'key_hot' };
    const limits = { perMinute: 1_000_000, perDay: 10_000_000 };
    await send([leasing], clock, key, limits, 200, 1); // the rate builds up
    const commandsBefore = await commandsExecuted(observer);
    const tripsBefore = await evalshaCalls();
    const decisions = await send([leasing], clock, key, limits, 5_000, 1); // 1,000 requests/s for 5 s
    await leasing.sweep();
    const commands = (await commandsExecuted(observer)) - commandsBefore;
    const trips = (await evalshaCalls()) - tripsBefore;
    const perRequest = { commands: commands / admitted(decisions), roundTrips: trips / admitted(decisions) };
    console.log(`hot key, 1,000 req/s: ${JSON.stringify(perRequest)} (${commands} commands, ${trips} scripts)`);
    expect(admitted(decisions)).toBe(5_000);
    expect(perRequest.commands).toBeLessThanOrEqual(0.05);
    expect(perRequest.roundTrips).toBeLessThanOrEqual(0.02);
    await leasing.close();
    const usage = await store.usage(key, limits);
    expect(limits.perMinute - usage.minute.remaining).toBe(5_200);
  });

  it('gives a key near its limit no lease: each request goes to Redis, exactly the limit admitted', async () => {
    const clock = new ManualClock(START);
    const { leasing } = await instance(uniqueNamespace('lz'), clock);
    const key = { keyId: 'key_near' };
    const limits = { perMinute: 120, perDay: 100_000 };
    const tripsBefore = await evalshaCalls();
    const decisions = await send([leasing], clock, key, limits, 400, 2);
    const trips = (await evalshaCalls()) - tripsBefore;
    expect(admitted(decisions)).toBe(120);
    // Below 16 units left nothing is granted: the last requests, and every refusal, were Redis's.
    expect(trips).toBeGreaterThanOrEqual(400 - 120 + 16);
    expect(decisions.slice(-280).every((d) => d.outcome === 'limited')).toBe(true);
    await leasing.close();
  });

  it('two instances on one key, a consumer and a cost of 3: never over a limit, and unused units come back when leases end', async () => {
    const clock = new ManualClock(START);
    const namespace = uniqueNamespace('lz');
    const [a, b] = [await instance(namespace, clock), await instance(namespace, clock)];
    const key = { keyId: 'key_two', consumerId: 'con_two' };
    const limits = { perMinute: 3_000, perDay: 100_000, perMonth: 1_000_000 };
    const consumer: ConsumerShare = { id: 'con_two', limits: { perMinute: 2_400, perDay: 50_000 }, billingDay: 1 };
    const options = { cost: 3, consumer };
    const decisions = await send([a.leasing, b.leasing], clock, key, limits, 1_200, 1, options);
    const used = admitted(decisions) * 3;
    // The consumer's minute (2,400) binds: exactly its limit, never more, once units have come back.
    expect(used).toBeLessThanOrEqual(2_400);
    expect(a.leasing.admissions.lease + b.leasing.admissions.lease).toBeGreaterThan(0);
    const held = await a.store.consumerUsage(consumer);
    expect(2_400 - held.minute!.remaining).toBeLessThanOrEqual(2_400);
    await a.leasing.close();
    await b.leasing.close();
    const after = await a.store.consumerUsage(consumer);
    const keyAfter = await a.store.usage(key, limits);
    expect(2_400 - after.minute!.remaining).toBe(used);
    expect(3_000 - keyAfter.minute.remaining).toBe(used);
    expect(1_000_000 - keyAfter.month!.remaining).toBe(used);
    expect(used).toBeGreaterThan(2_400 - 2 * 3 * 40);
  });

  it.each([
    ['swept after its life', (a: LeasingKeyLimiter, clock: ManualClock) => (clock.advance(LEASE_LIFE_MS), a.sweep())],
    ['closed', (a: LeasingKeyLimiter) => a.close()],
  ])(
    "no under-admission once a lease's units come back (%s): B alone then fills the window to the limit exactly",
    async (_how, endLease) => {
      const clock = new ManualClock(START);
      const namespace = uniqueNamespace('lz');
      const [a, b] = [await instance(namespace, clock), await instance(namespace, clock)];
      const key = { keyId: 'key_back' };
      const limits = { perMinute: 1_000, perDay: 100_000 };
      // A is busy (1,000 requests/s): it holds a lease with units it has not used.
      const first = await send([a.leasing], clock, key, limits, 150, 1);
      expect(a.leasing.admissions.lease).toBeGreaterThan(0);
      expect(a.leasing.book.outstandingUnits()).toBeGreaterThan(0);
      await endLease(a.leasing, clock);
      expect(a.leasing.book.outstandingUnits()).toBe(0);
      // B alone, until refused and well past: every unit A did not use is B's to admit.
      const rest = await send([b.leasing], clock, key, limits, 1_000, 1);
      expect(admitted(first) + admitted(rest)).toBe(limits.perMinute);
      expect(b.leasing.admissions.lease).toBeGreaterThan(0);
      expect(rest.slice(-50).every((d) => d.outcome === 'limited')).toBe(true);
      await b.leasing.close();
    },
  );

  it('gives nothing back to a window that has turned since the lease counted in it', async () => {
    // Half a second before the minute ends: a lease ends with its minute, its return goes to the day only.
    const clock = new ManualClock(Date.UTC(2026, 2, 2, 10, 0, 59, 500));
    const { store, leasing } = await instance(uniqueNamespace('lz'), clock);
    const key = { keyId: 'key_turn' };
    const limits = { perMinute: 1_000_000, perDay: 10_000_000 };
    const decisions = await send([leasing], clock, key, limits, 1_000, 1);
    // The new minute holds what its own requests used; the day what all used.
    await leasing.close();
    const usage = await store.usage(key, limits);
    expect(limits.perDay - usage.day.remaining).toBeGreaterThanOrEqual(admitted(decisions));
    const inNewMinute = decisions.filter((d) => d.outcome === 'allowed' && d.now >= Date.UTC(2026, 2, 2, 10, 1)).length;
    expect(limits.perMinute - usage.minute.remaining).toBe(inNewMinute);
    expect(inNewMinute).toBeGreaterThan(400);
    // A return naming the minute that ended (a late one): Redis takes nothing off the new minute.
    const late = {
      holder: key,
      units: 5,
      windows: [{ name: 'minute' as const, startAt: Date.UTC(2026, 2, 2, 10, 0) }],
      takenAt: Date.UTC(2026, 2, 2, 10, 0, 59, 500),
      granted: 5,
      inConsumerWindows: false,
    };
    expect(await store.returnUnits([{ ...late, complete: true }])).toEqual([false]);
    expect(limits.perMinute - (await store.usage(key, limits)).minute.remaining).toBe(inNewMinute);
    const current = { ...late, windows: [{ name: 'minute' as const, startAt: Date.UTC(2026, 2, 2, 10, 1) }] };
    expect(await store.returnUnits([{ ...current, complete: true }])).toEqual([true]);
    expect(limits.perMinute - (await store.usage(key, limits)).minute.remaining).toBe(inNewMinute - 5);
  });

  it('a window reset counts the units out in leases: a lease it counted gives back to the restarted windows', async () => {
    const clock = new ManualClock(START);
    const { store } = await instance(uniqueNamespace('lz'), clock);
    const key = { keyId: 'key_reset' };
    const limits = { perMinute: 1_000, perDay: 100_000, perMonth: 1_000_000 };
    const { grant } = await store.consumeWithLease(key, limits, undefined, 100, null);
    expect(grant?.units).toBe(100);
    clock.advance(10);
    await store.resetWindows(key, ['minute', 'day', 'month']);
    const used = async () => {
      const usage = await store.usage(key, limits);
      return [usage.minute, usage.day, usage.month!].map((w) => w.limit - w.remaining);
    };
    // The lease may still admit its 100 units anywhere: the restarted windows count them.
    expect(await used()).toEqual([100, 100, 100]);
    for (let i = 0; i < 150; i++) await store.consume(key, limits);
    const back = wholeReturn(key, grant!);
    expect(await store.returnUnits([back])).toEqual([true]);
    expect(await used()).toEqual([150, 150, 150]);
  });

  it('gives nothing back to a window reset after the lease ended (a late return): the reset did not count it', async () => {
    const clock = new ManualClock(START);
    const { store } = await instance(uniqueNamespace('lz'), clock);
    const key = { keyId: 'key_reset_late' };
    const limits = { perMinute: 1_000, perDay: 100_000, perMonth: 1_000_000 };
    const { grant } = await store.consumeWithLease(key, limits, undefined, 100, null);
    clock.advance(1_500); // past the lease's life and its ledger bucket
    await store.resetWindows(key, ['minute', 'day', 'month']);
    for (let i = 0; i < 150; i++) await store.consume(key, limits);
    const back = wholeReturn(key, grant!);
    // Without the reset's mark (rs), the return took 100 off the 150 the reset windows had counted since.
    expect(await store.returnUnits([back])).toEqual([false]);
    const usage = await store.usage(key, limits);
    expect([usage.minute, usage.day, usage.month!].map((w) => w.limit - w.remaining)).toEqual([150, 150, 150]);
  });
});
