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
  it('writes nothing on the request path, the changed months together on close, and starts from them again', async () => {
    const ledger = new FakeLedger();
    const clock = new ManualClock(NOW);
    const first = limiterOn(ledger, clock);
    for (let i = 0; i < 4; i++) await first.consume('key_a', limits);
    await first.consume('key_b', limits, { cost: 3 });
    expect(ledger.saves).toEqual([]);
    await first.close();
    expect(ledger.saves).toHaveLength(1);
    expect(ledger.saves[0]!.map((e) => [e.keyId, e.count])).toEqual([
      ['key_a', 4],
      ['key_b', 3],
    ]);

    const second = limiterOn(ledger, clock);
    expect((await second.usage('key_a', limits)).month).toMatchObject({
      remaining: 6,
      credits: 0,
      resetAt: Date.UTC(2026, 3, 1),
    });
    expect(await second.consume('key_b', limits)).toMatchObject({ outcome: 'allowed', month: { remaining: 6 } });
  });

  it('writes a grant before applying it: a refused write applies nothing and throws to the admin API', async () => {
    const ledger = new FakeLedger();
    const limiter = limiterOn(ledger, new ManualClock(NOW));
    await limiter.addCredits('key_a', 5);
    expect(ledger.rows.get('key_a')).toMatchObject({
      credits: 5,
      monthStart: Date.UTC(2026, 2, 1),
      monthEnd: Date.UTC(2026, 3, 1),
    });
    ledger.failing = true;
    await expect(limiter.addCredits('key_a', 7)).rejects.toThrow('disk full');
    expect((await limiter.usage('key_a', limits)).month).toMatchObject({ credits: 5, limit: 15 });
  });

  it('keeps months whose write failed marked, and writes them with the next batch', async () => {
    const ledger = new FakeLedger();
    const errors: unknown[] = [];
    const limiter = limiterOn(ledger, new ManualClock(NOW), errors);
    await limiter.consume('key_a', limits);
    ledger.failing = true;
    limiter.flushMonths();
    expect(errors).toHaveLength(1);
    ledger.failing = false;
    await limiter.consume('key_b', limits);
    limiter.flushMonths();
    expect([ledger.rows.get('key_a')?.count, ledger.rows.get('key_b')?.count]).toEqual([1, 1]);
    await limiter.close();
  });

  it('drops a month that has ended: the next one starts from its quota', async () => {
    const ledger = new FakeLedger();
    const clock = new ManualClock(NOW);
    const first = limiterOn(ledger, clock);
    await first.consume('key_a', limits, { cost: 9 });
    await first.close();
    clock.set(Date.UTC(2026, 3, 1, 0, 0, 1));
    expect((await limiterOn(ledger, clock).usage('key_a', limits)).month).toMatchObject({ remaining: 10 });
  });
});
