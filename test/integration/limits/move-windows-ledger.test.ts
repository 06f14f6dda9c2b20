import Redis from 'ioredis';
import { ManualClock } from '../../../src/shared/clock';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { RedisKeyLimiter } from '../../../src/limits/redis/redis-key-limiter';
import { RedisWindowsMove } from '../../../src/limits/redis/move-windows';
import { RedisNames } from '../../../src/limits/redis/redis-names';
import { LeasingKeyLimiter } from '../../../src/limits/leases/leasing-key-limiter';
import type { ConsumerShare, KeyRef } from '../../../src/limits/types';
import { uniqueNamespace } from '../../support/test-redis';
import { useRedisPerFile } from '../../support/redis-per-file';

/**
 * A key's windows moved to another consumer (move-windows.ts) take the ledger of units out in leases
 * and the reset marks (`rs`) with them (docs/scaling.md "Window resets"): a window reset at the new
 * place then counts the leases other instances still hold, so it admits no more than its limit.
 */
const redis = useRedisPerFile();
const BAN = { threshold: 1_000_000, windowSeconds: 60, durationSeconds: 60 };
/** 2026-03-02 10:00:05 UTC: 55 s left in the minute. */
const START = Date.UTC(2026, 2, 2, 10, 0, 5);
const clients: RedisClient[] = [];
let observer: Redis;

beforeAll(() => {
  observer = new Redis(redis.url);
});

afterAll(async () => {
  for (const client of clients) await client.quit();
  observer.disconnect();
});

async function client(): Promise<RedisClient> {
  const c = await connectRedis({ url: redis.url, clusterNodes: [], commandTimeoutMs: 5000 });
  clients.push(c);
  return c;
}

async function instance(namespace: string, clock: ManualClock) {
  const store = new RedisKeyLimiter(await client(), { namespace, ban: BAN, clock });
  return new LeasingKeyLimiter(store, { clock, enabled: () => true, sweepMs: 3_600_000 });
}

const share = (id: string): ConsumerShare => ({
  id,
  limits: { perMinute: 100_000, perDay: 1_000_000 },
  billingDay: 1,
});

describe('a key moved to another consumer while another instance holds a lease of it', () => {
  it("a reset at the new place counts A's lease: A's lease and B's admissions stay within the limit", async () => {
    const clock = new ManualClock(START);
    const namespace = uniqueNamespace('mvl');
    const [a, b] = [await instance(namespace, clock), await instance(namespace, clock)];
    const from: KeyRef = { keyId: 'key_moving', consumerId: 'con_from' };
    const to: KeyRef = { keyId: 'key_moving', consumerId: 'con_to' };
    const limits = { perMinute: 800, perDay: 100_000 };
    for (let i = 0; i < 100 && a.admissions.lease === 0; i++) {
      await a.consume(from, limits, { consumer: share('con_from') });
      clock.advance(1);
    }
    expect(a.admissions.lease).toBeGreaterThan(0);
    await b.moveWindows(from, to);
    await b.resetWindows(to, ['minute', 'day']);
    // A has not learnt of the move yet: it admits from its lease under the old consumer. Its first
    // request the lease cannot admit goes to the old place (the second move carries it), so it stops there.
    let fromLease = 0;
    let aDone = false;
    let bAdmitted = 0;
    let bRefusedInARow = 0;
    for (let i = 0; i < 2_000 && (!aDone || bRefusedInARow < 4); i++) {
      if (i % 2 === 0 && !aDone) {
        const d = await a.consume(from, limits, { consumer: share('con_from') });
        if (d.outcome === 'allowed' && d.fromLease === true) fromLease++;
        else aDone = true;
      } else if (bRefusedInARow < 4) {
        const d = await b.consume(to, limits, { consumer: share('con_to') });
        if (d.outcome === 'allowed') {
          bAdmitted++;
          bRefusedInARow = 0;
        } else bRefusedInARow++;
      }
    }
    console.log(`moved + reset: A's lease admitted ${fromLease}, B ${bAdmitted} (limit ${limits.perMinute})`);
    expect(fromLease).toBeGreaterThan(0);
    expect(fromLease + bAdmitted).toBeLessThanOrEqual(limits.perMinute);
    expect(fromLease + bAdmitted).toBeGreaterThan(limits.perMinute - 200);
    await a.close();
    await b.close();
  });
});

describe("the move's merge of the ledger and the reset marks", () => {
  const namespace = uniqueNamespace('mvm');
  const names = new RedisNames(namespace);
  let mover: RedisWindowsMove;

  beforeAll(async () => {
    mover = new RedisWindowsMove(await client());
  });

  async function moved(
    source: Record<string, string>,
    target: Record<string, string>,
    months: { source: Record<string, string>; target: Record<string, string> },
  ): Promise<{ hash: Record<string, string>; month: Record<string, string> }> {
    const id = uniqueNamespace('k');
    const [from, to] = [names.key({ keyId: id, consumerId: 'con_a' }), names.key({ keyId: id, consumerId: 'con_b' })];
    await observer.hset(from.hash, source);
    await observer.hset(from.month, months.source);
    if (Object.keys(target).length > 0) await observer.hset(to.hash, target);
    if (Object.keys(months.target).length > 0) await observer.hset(to.month, months.target);
    await mover.move(from, to);
    expect(await observer.exists(from.hash, from.month)).toBe(0);
    return { hash: await observer.hgetall(to.hash), month: await observer.hgetall(to.month) };
  }

  const MONTH = '1772323200000';
  /** Reset marks and ledger buckets as Redis holds them: ms from START, buckets of 1 s. */
  const RS = (ms: number) => String(START + ms);
  const LB = (n: number) => String(Math.floor(START / 1000) + n);

  it('same bucket: units add; an older one is replaced; a newer one is kept; the later rs wins', async () => {
    const { hash, month } = await moved(
      { mw: '1', mc: '2', lb0: LB(10), lu0: '5', lb1: LB(11), lu1: '7', rs: RS(2000) },
      { lb0: LB(10), lu0: '3', lb1: LB(9), lu1: '100', rs: RS(1000) },
      { source: { w: MONTH, c: '4', k: '0', rs: RS(2500) }, target: { w: MONTH, c: '1', rs: RS(1500) } },
    );
    expect([hash.lb0, hash.lu0, hash.lb1, hash.lu1, hash.rs]).toEqual([LB(10), '8', LB(11), '7', RS(2000)]);
    expect([month.c, month.rs]).toEqual(['5', RS(2500)]);
  });

  it('a newer target bucket and a later target rs stay; an absent slot takes the source', async () => {
    const { hash, month } = await moved(
      { mw: '1', mc: '2', lb0: LB(10), lu0: '5', lb1: LB(11), lu1: '7', rs: RS(2000) },
      { lb0: LB(12), lu0: '4', rs: RS(3000) },
      { source: { w: MONTH, c: '4', k: '0', rs: RS(2500) }, target: { w: MONTH, c: '1', rs: RS(3500) } },
    );
    expect([hash.lb0, hash.lu0, hash.lb1, hash.lu1, hash.rs]).toEqual([LB(12), '4', LB(11), '7', RS(3000)]);
    expect([month.c, month.rs]).toEqual(['5', RS(3500)]);
  });

  it('an empty target takes the whole ledger and both rs', async () => {
    const { hash, month } = await moved(
      { mw: '1', mc: '2', lb0: LB(10), lu0: '5', lb1: LB(11), lu1: '7', rs: RS(2000) },
      {},
      { source: { w: MONTH, c: '4', k: '0', rs: RS(2500) }, target: {} },
    );
    expect([hash.lb0, hash.lu0, hash.lb1, hash.lu1, hash.rs]).toEqual([LB(10), '5', LB(11), '7', RS(2000)]);
    expect([month.w, month.c, month.rs]).toEqual([MONTH, '4', RS(2500)]);
  });

  // bt, when a hash began counting (lua-model.ts): a lease taken before it gives nothing back to it.
  it('an empty target takes the source’s bt, hash and month', async () => {
    const { hash, month } = await moved(
      { mw: '1', mc: '2', bt: RS(100) },
      {},
      { source: { w: MONTH, c: '4', k: '0', bt: RS(50) }, target: {} },
    );
    expect([hash.bt, month.bt]).toEqual([RS(100), RS(50)]);
  });

  it('the earlier bt wins, so units moved in from before the target began still go back', async () => {
    const { hash, month } = await moved(
      { mw: '1', mc: '2', bt: RS(100) },
      { mw: '1', mc: '3', bt: RS(900) },
      { source: { w: MONTH, c: '4', k: '0', bt: RS(800) }, target: { w: MONTH, c: '1', bt: RS(70) } },
    );
    expect([hash.bt, month.bt]).toEqual([RS(100), RS(70)]);
  });

  it('a target with a bt and a source without one (written before bt existed) leaves none', async () => {
    const { hash, month } = await moved(
      { mw: '1', mc: '2' },
      { mw: '1', mc: '3', bt: RS(900) },
      { source: { w: MONTH, c: '4', k: '0' }, target: { w: MONTH, c: '1', bt: RS(70) } },
    );
    expect([hash.bt, month.bt]).toEqual([undefined, undefined]);
  });
});
