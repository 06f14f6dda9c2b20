import { ManualClock } from '../../../../src/shared/clock';
import { MemoryKeyLimiter } from '../../../../src/limits';
import type { MonthEntry, MonthLedger } from '../../../../src/limits';

/** Issue 42: the in-process store's months outlive a restart; counts are batched off the request path, credits written before they apply. */
const NOW = Date.UTC(2026, 2, 15, 12);
const limits = { perMinute: 100, perDay: 1000, perMonth: 10 };
const ban = { threshold: 10, windowSeconds: 60, durationSeconds: 60 };

class FakeLedger implements MonthLedger {
  rows = new Map<string, MonthEntry>();
  saves: MonthEntry[][] = [];
  failing = false;
  load(now: number): MonthEntry[] {
    return [...this.rows.values()].filter((e) => e.monthEnd > now);
  }
  save(entries: readonly MonthEntry[]): void {
    if (this.failing) throw new Error('disk full');
    this.saves.push([...entries]);
    for (const e of entries) this.rows.set(e.keyId, { ...e });
  }
}

const limiterOn = (ledger: MonthLedger, clock: ManualClock, errors: unknown[] = []) =>
  new MemoryKeyLimiter({
    ban,
    clock,
    sweepIntervalMs: 0,
    monthLedger: ledger,
    monthFlushIntervalMs: 0,
    onMonthLedgerError: (err) => errors.push(err),
  });

describe('MemoryKeyLimiter with a month ledger', () => {
  it("keeps a consumer's key under the key's id, and reads a ledger that named it after its consumer (before KeyRef)", async () => {
    const ledger = new FakeLedger();
    const clock = new ManualClock(NOW);
    const month = { monthStart: Date.UTC(2026, 2, 1), monthEnd: Date.UTC(2026, 3, 1) };
    // Written before: the Redis store's windows id of a consumer's key, and the key's own row from before it joined.
    ledger.rows.set('con_a}:k:{key_c', { keyId: 'con_a}:k:{key_c', ...month, count: 4, credits: 2 });
    ledger.rows.set('key_c', { keyId: 'key_c', ...month, count: 1, credits: 0 });
    const limiter = limiterOn(ledger, clock);
    const ofConsumer = { keyId: 'key_c', consumerId: 'con_a' };
    expect((await limiter.usage(ofConsumer, limits)).month).toMatchObject({ limit: 12, remaining: 8, credits: 2 });
    // Another consumer, or none: the same windows (this store keeps a key's under its id).
    await limiter.consume({ keyId: 'key_c', consumerId: 'con_b' }, limits);
    await limiter.moveWindows(ofConsumer, { keyId: 'key_c' });
    expect((await limiter.usage({ keyId: 'key_c' }, limits)).month).toMatchObject({ remaining: 7 });
    await limiter.close();
    expect(ledger.rows.get('key_c')).toMatchObject({ count: 5, credits: 2 });
  });

  it('writes nothing on the request path, the changed months together on close, and starts from them again', async () => {
    const ledger = new FakeLedger();
    const clock = new ManualClock(NOW);
    const first = limiterOn(ledger, clock);
    for (let i = 0; i < 4; i++) await first.consume({ keyId: 'key_a' }, limits);
    await first.consume({ keyId: 'key_b' }, limits, { cost: 3 });
    expect(ledger.saves).toEqual([]);
    await first.close();
    expect(ledger.saves).toHaveLength(1);
    expect(ledger.saves[0]!.map((e) => [e.keyId, e.count])).toEqual([
      ['key_a', 4],
      ['key_b', 3],
    ]);

    const second = limiterOn(ledger, clock);
    expect((await second.usage({ keyId: 'key_a' }, limits)).month).toMatchObject({
      remaining: 6,
      credits: 0,
      resetAt: Date.UTC(2026, 3, 1),
    });
    expect(await second.consume({ keyId: 'key_b' }, limits)).toMatchObject({
      outcome: 'allowed',
      month: { remaining: 6 },
    });
  });

  it('writes a grant before applying it: a refused write applies nothing and throws to the admin API', async () => {
    const ledger = new FakeLedger();
    const limiter = limiterOn(ledger, new ManualClock(NOW));
    await limiter.addCredits({ keyId: 'key_a' }, 5);
    expect(ledger.rows.get('key_a')).toMatchObject({
      credits: 5,
      monthStart: Date.UTC(2026, 2, 1),
      monthEnd: Date.UTC(2026, 3, 1),
    });
    ledger.failing = true;
    await expect(limiter.addCredits({ keyId: 'key_a' }, 7)).rejects.toThrow('disk full');
    expect((await limiter.usage({ keyId: 'key_a' }, limits)).month).toMatchObject({ credits: 5, limit: 15 });
  });

  it('keeps months whose write failed marked, and writes them with the next batch', async () => {
    const ledger = new FakeLedger();
    const errors: unknown[] = [];
    const limiter = limiterOn(ledger, new ManualClock(NOW), errors);
    await limiter.consume({ keyId: 'key_a' }, limits);
    ledger.failing = true;
    limiter.flushMonths();
    expect(errors).toHaveLength(1);
    ledger.failing = false;
    await limiter.consume({ keyId: 'key_b' }, limits);
    limiter.flushMonths();
    expect([ledger.rows.get('key_a')?.count, ledger.rows.get('key_b')?.count]).toEqual([1, 1]);
    await limiter.close();
  });

  it('drops a month that has ended: the next one starts from its quota', async () => {
    const ledger = new FakeLedger();
    const clock = new ManualClock(NOW);
    const first = limiterOn(ledger, clock);
    await first.consume({ keyId: 'key_a' }, limits, { cost: 9 });
    await first.close();
    clock.set(Date.UTC(2026, 3, 1, 0, 0, 1));
    expect((await limiterOn(ledger, clock).usage({ keyId: 'key_a' }, limits)).month).toMatchObject({ remaining: 10 });
  });
});
