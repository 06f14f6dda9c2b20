import { ManualClock } from '../../../src/shared/clock';
import type { KeyDecision, KeyLimiter, MinuteWindowShape, WindowLimits } from '../../../src/limits/types';
import { NO_BAN, type ShapedLimiterHarness } from './minute-window-behaviours';

/**
 * What every KeyLimiter does with a month window, credits and costs (CONTRACT §4), whatever its
 * store. Called by the in-process, Redis and Cluster suites with a way to build a limiter on a
 * ManualClock.
 */

/** 15 March 2026, 12:00:17.5 UTC: billing day 10 has passed this month, billing day 20 is still ahead. */
const NOW = Date.UTC(2026, 2, 15, 12, 0, 17, 500);
const ROOMY = { perMinute: 1000, perDay: 10_000 };

function limited(d: KeyDecision): Extract<KeyDecision, { outcome: 'limited' }> {
  if (d.outcome !== 'limited') throw new Error(`expected limited, got ${d.outcome}`);
  return d;
}

function allowed(d: KeyDecision): Extract<KeyDecision, { outcome: 'allowed' }> {
  if (d.outcome !== 'allowed') throw new Error(`expected allowed, got ${d.outcome}`);
  return d;
}

export function describeMonthWindowBehaviours(name: string, harness: ShapedLimiterHarness): void {
  describe(`${name}: month window, credits and costs`, () => {
    let clock: ManualClock;
    let limiter: KeyLimiter;

    async function setUp(shape: MinuteWindowShape = 'fixed'): Promise<void> {
      clock = new ManualClock(NOW);
      limiter = await harness.create(clock, NO_BAN, shape);
    }

    afterEach(async () => {
      await limiter?.close();
    });

    it.each([
      // Billing day before today: this month started on 10 March and ends on 10 April.
      [10, Date.UTC(2026, 2, 10), Date.UTC(2026, 3, 10)],
      // Billing day after today: the month started on 20 February and ends on 20 March.
      [20, Date.UTC(2026, 1, 20), Date.UTC(2026, 2, 20)],
      // The default, the 1st.
      [1, Date.UTC(2026, 2, 1), Date.UTC(2026, 3, 1)],
    ])(
      'spends a month quota of 5 with billing day %i, refuses until the next billing day, then serves again',
      async (billingDay, start, end) => {
        await setUp();
        const limits: WindowLimits = { ...ROOMY, perMonth: 5 };
        const options = { billingDay };
        for (let i = 0; i < 5; i++) {
          const d = allowed(await limiter.consume({ keyId: 'm1' }, limits, options));
          expect(d.month).toEqual({ limit: 5, remaining: 4 - i, resetAt: end, startAt: start, credits: 0 });
        }
        const refused = limited(await limiter.consume({ keyId: 'm1' }, limits, options));
        expect(refused.refusedBy).toBe('month');
        expect(refused.retryAfterMs).toBe(end - NOW);
        expect(refused.month).toEqual({ limit: 5, remaining: 0, resetAt: end, startAt: start, credits: 0 });
        // Nothing consumed by the refusal.
        expect(refused.minute.remaining).toBe(995);
        expect(refused.day.remaining).toBe(9995);

        clock.set(end - 1);
        expect(limited(await limiter.consume({ keyId: 'm1' }, limits, options)).refusedBy).toBe('month');
        clock.set(end);
        const again = allowed(await limiter.consume({ keyId: 'm1' }, limits, options));
        expect(again.month!.remaining).toBe(4);
        expect(again.month!.startAt).toBe(end);
        const usage = await limiter.usage({ keyId: 'm1' }, limits, billingDay);
        expect(usage.month).toEqual(again.month);
      },
    );

    it('keeps the month of each billing day apart: a key billed on the 20th starts afresh on 20 March', async () => {
      await setUp();
      const limits: WindowLimits = { ...ROOMY, perMonth: 2 };
      await limiter.consume({ keyId: 'm2' }, limits, { billingDay: 20 });
      await limiter.consume({ keyId: 'm2' }, limits, { billingDay: 20 });
      expect(limited(await limiter.consume({ keyId: 'm2' }, limits, { billingDay: 20 })).refusedBy).toBe('month');
      clock.set(Date.UTC(2026, 2, 19, 23, 59, 59, 999));
      expect((await limiter.usage({ keyId: 'm2' }, limits, 20)).month!.remaining).toBe(0);
      clock.set(Date.UTC(2026, 2, 20));
      expect((await limiter.usage({ keyId: 'm2' }, limits, 20)).month).toEqual({
        limit: 2,
        remaining: 2,
        resetAt: Date.UTC(2026, 3, 20),
        startAt: Date.UTC(2026, 2, 20),
        credits: 0,
      });
    });

    it('adds exactly the credited units to this month only', async () => {
      await setUp();
      const limits: WindowLimits = { ...ROOMY, perMonth: 3 };
      const options = { billingDay: 10 };
      for (let i = 0; i < 3; i++) allowed(await limiter.consume({ keyId: 'c1' }, limits, options));
      limited(await limiter.consume({ keyId: 'c1' }, limits, options));

      await limiter.addCredits({ keyId: 'c1' }, 2, 10);
      const usage = await limiter.usage({ keyId: 'c1' }, limits, 10);
      expect(usage.month).toMatchObject({ limit: 5, remaining: 2, credits: 2 });
      expect(allowed(await limiter.consume({ keyId: 'c1' }, limits, options)).month!.remaining).toBe(1);
      expect(allowed(await limiter.consume({ keyId: 'c1' }, limits, options)).month!.remaining).toBe(0);
      expect(limited(await limiter.consume({ keyId: 'c1' }, limits, options)).refusedBy).toBe('month');

      // Credits end with their month.
      clock.set(Date.UTC(2026, 3, 10));
      expect((await limiter.usage({ keyId: 'c1' }, limits, 10)).month).toMatchObject({
        limit: 3,
        remaining: 3,
        credits: 0,
      });
    });

    it('credits a key that has not been used this month', async () => {
      await setUp();
      const limits: WindowLimits = { ...ROOMY, perMonth: 1 };
      await limiter.addCredits({ keyId: 'c2' }, 4);
      const usage = await limiter.usage({ keyId: 'c2' }, limits);
      expect(usage.month).toMatchObject({ limit: 5, remaining: 5, credits: 4, resetAt: Date.UTC(2026, 3, 1) });
      for (let i = 0; i < 5; i++) allowed(await limiter.consume({ keyId: 'c2' }, limits));
      limited(await limiter.consume({ keyId: 'c2' }, limits));
    });

    it.each(['fixed', 'sliding'] as const)(
      'takes 4 units of every window for a cost-4 request, and refuses it whole when 3 are left (%s minute)',
      async (shape) => {
        await setUp(shape);
        const limits: WindowLimits = { perMinute: 7, perDay: 100, perMonth: 1000 };
        const first = allowed(await limiter.consume({ keyId: 'cost' }, limits, { cost: 4 }));
        expect([first.minute.remaining, first.day.remaining, first.month!.remaining]).toEqual([3, 96, 996]);

        clock.advance(1000);
        const refused = limited(await limiter.consume({ keyId: 'cost' }, limits, { cost: 4 }));
        expect(refused.refusedBy).toBe('minute');
        expect([refused.minute.remaining, refused.day.remaining, refused.month!.remaining]).toEqual([3, 96, 996]);
        // The minute frees its units when the first request leaves it: the UTC minute's end (fixed), or
        // 60 s after the first request (sliding).
        const expectedReset = shape === 'fixed' ? Date.UTC(2026, 2, 15, 12, 1) : NOW + 60_000;
        expect(refused.retryAfterMs).toBe(expectedReset - (NOW + 1000));

        // Three units are left, so a cost-3 request still fits.
        const three = allowed(await limiter.consume({ keyId: 'cost' }, limits, { cost: 3 }));
        expect([three.minute.remaining, three.day.remaining, three.month!.remaining]).toEqual([0, 93, 993]);
      },
    );

    it('refuses a cost-4 request whole when the month has 3 units left, with Retry-After to the billing day', async () => {
      await setUp();
      const limits: WindowLimits = { ...ROOMY, perMonth: 11 };
      allowed(await limiter.consume({ keyId: 'cm' }, limits, { cost: 4, billingDay: 20 }));
      allowed(await limiter.consume({ keyId: 'cm' }, limits, { cost: 4, billingDay: 20 }));
      const refused = limited(await limiter.consume({ keyId: 'cm' }, limits, { cost: 4, billingDay: 20 }));
      expect(refused.refusedBy).toBe('month');
      expect(refused.month!.remaining).toBe(3);
      expect(refused.day.remaining).toBe(9992);
      expect(refused.retryAfterMs).toBe(Date.UTC(2026, 2, 20) - NOW);
      expect(
        allowed(await limiter.consume({ keyId: 'cm' }, limits, { cost: 3, billingDay: 20 })).month!.remaining,
      ).toBe(0);
    });

    it('refuses a cost-4 request whole when the day has 3 units left', async () => {
      await setUp();
      const limits: WindowLimits = { perMinute: 100, perDay: 7 };
      allowed(await limiter.consume({ keyId: 'cd' }, limits, { cost: 4 }));
      const refused = limited(await limiter.consume({ keyId: 'cd' }, limits, { cost: 4 }));
      expect(refused.refusedBy).toBe('day');
      expect([refused.minute.remaining, refused.day.remaining]).toEqual([96, 3]);
      expect(refused.retryAfterMs).toBe(Date.UTC(2026, 2, 16) - NOW);
    });

    it('answers without a month when the limits have no perMonth', async () => {
      await setUp();
      const d = await limiter.consume({ keyId: 'plain' }, ROOMY, { billingDay: 10 });
      expect('month' in d).toBe(false);
      const usage = await limiter.usage({ keyId: 'plain' }, ROOMY, 10);
      expect('month' in usage).toBe(false);
    });
  });
}
