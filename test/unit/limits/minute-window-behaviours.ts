import { ManualClock } from '../../../src/shared/clock';
import type { BanSettings, KeyDecision, KeyLimiter, MinuteWindowShape, WindowLimits } from '../../../src/limits/types';

/**
 * What the window shapes (config `rateLimit.minuteWindow`) and shadow mode do, whatever the store.
 * Each store's suite calls `describeMinuteWindowBehaviours` with a way to build a fresh limiter of a
 * given shape on a ManualClock.
 */
export interface ShapedLimiterHarness {
  create(clock: ManualClock, ban: BanSettings, shape: MinuteWindowShape): KeyLimiter | Promise<KeyLimiter>;
}

/** A threshold no test reaches, so that refusals never turn into bans where counts are compared. */
export const NO_BAN: BanSettings = { threshold: 1_000_000, windowSeconds: 60, durationSeconds: 900 };
const DEFAULT_BAN: BanSettings = { threshold: 10, windowSeconds: 60, durationSeconds: 900 };
const FREE: WindowLimits = { perMinute: 60, perDay: 1000 };
const SECOND = 1000;
const MINUTE = 60 * SECOND;
/** 12:00:58 UTC: two seconds before a minute boundary. */
const AT_58 = Date.UTC(2026, 0, 1, 12, 0, 58);

async function burst(limiter: KeyLimiter, keyId: string, limits: WindowLimits, times: number): Promise<KeyDecision[]> {
  const decisions: KeyDecision[] = [];
  for (let i = 0; i < times; i++) decisions.push(await limiter.consume({ keyId }, limits));
  return decisions;
}

const admitted = (decisions: KeyDecision[]) => decisions.filter((d) => d.outcome === 'allowed').length;

/**
 * The largest number of admissions in any interval [t, t + 60 s). It is enough to start intervals
 * at admission instants: an interval's count only grows by moving its start to its first admission.
 */
export function mostAdmittedInAnyMinute(admissionTimes: number[]): number {
  const times = [...admissionTimes].sort((a, b) => a - b);
  let most = 0;
  let end = 0;
  for (let start = 0; start < times.length; start++) {
    while (end < times.length && times[end]! < times[start]! + MINUTE) end++;
    most = Math.max(most, end - start);
  }
  return most;
}

export function describeMinuteWindowBehaviours(name: string, harness: ShapedLimiterHarness): void {
  describe(`${name}: minute window shapes and shadow mode`, () => {
    const limiters: KeyLimiter[] = [];
    async function create(
      clock: ManualClock,
      shape: MinuteWindowShape,
      ban: BanSettings = NO_BAN,
    ): Promise<KeyLimiter> {
      const limiter = await harness.create(clock, ban, shape);
      limiters.push(limiter);
      return limiter;
    }

    afterEach(async () => {
      for (const limiter of limiters.splice(0)) await limiter.close();
    });

    it('a burst at :58 and another at :02: fixed admits twice the limit in 4 s, sliding admits the limit', async () => {
      const results: Record<MinuteWindowShape, number[]> = { fixed: [], sliding: [] };
      for (const shape of ['fixed', 'sliding'] as const) {
        const clock = new ManualClock(AT_58);
        const limiter = await create(clock, shape);
        results[shape].push(admitted(await burst(limiter, 'k1', FREE, 60)));
        clock.set(AT_58 + 4 * SECOND);
        results[shape].push(admitted(await burst(limiter, 'k1', FREE, 60)));
      }
      // Side by side: the fixed window's boundary burst, and none with a sliding one.
      expect(results).toEqual({ fixed: [60, 60], sliding: [60, 0] });
    });

    it('sliding: Retry-After is the wait until the oldest admitted request leaves the interval', async () => {
      const clock = new ManualClock(AT_58);
      const limiter = await create(clock, 'sliding');
      const limits = { perMinute: 3, perDay: 1000 };
      await limiter.consume({ keyId: 'k1' }, limits);
      clock.set(AT_58 + 10 * SECOND);
      const second = await limiter.consume({ keyId: 'k1' }, limits);
      await limiter.consume({ keyId: 'k1' }, limits);
      // Room frees when the first admission (at :58) is a minute old.
      expect(second.outcome === 'allowed' && second.minute).toEqual({
        limit: 3,
        remaining: 1,
        resetAt: AT_58 + MINUTE,
      });

      clock.set(AT_58 + 30 * SECOND);
      const refused = await limiter.consume({ keyId: 'k1' }, limits);
      expect(refused).toMatchObject({ outcome: 'limited', refusedBy: 'minute', retryAfterMs: 30 * SECOND });
      expect(refused.outcome === 'limited' && refused.minute).toEqual({
        limit: 3,
        remaining: 0,
        resetAt: AT_58 + MINUTE,
      });

      clock.set(AT_58 + MINUTE - 1);
      expect((await limiter.consume({ keyId: 'k1' }, limits)).outcome).toBe('limited');
      clock.set(AT_58 + MINUTE);
      const served = await limiter.consume({ keyId: 'k1' }, limits);
      expect(served.outcome).toBe('allowed');
      // Now the oldest in the interval is the one admitted at :08.
      expect(served.outcome === 'allowed' && served.minute).toEqual({
        limit: 3,
        remaining: 0,
        resetAt: AT_58 + 10 * SECOND + MINUTE,
      });
    });

    it('sliding: over random traffic no 60-second interval admits more than the limit, and nothing is refused that fits', async () => {
      const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 40));
      const limiter = await create(clock, 'sliding');
      const limits = { perMinute: 7, perDay: 100_000 };
      // A fixed pseudo-random walk (LCG) so that a failure replays exactly.
      let seed = 42;
      const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
      const admissions: number[] = [];
      for (let i = 0; i < 400; i++) {
        clock.advance(Math.floor(next() * 4_000));
        const now = clock.now();
        const decision = await limiter.consume({ keyId: 'k1' }, limits);
        const inInterval = admissions.filter((t) => t > now - MINUTE).length;
        // Exact, not approximate: admitted if and only if the last 60 s hold fewer than the limit.
        expect({ i, outcome: decision.outcome }).toEqual({
          i,
          outcome: inInterval < limits.perMinute ? 'allowed' : 'limited',
        });
        if (decision.outcome === 'allowed') admissions.push(now);
        if (decision.outcome === 'limited')
          expect(decision.retryAfterMs).toBe(admissions.find((t) => t > now - MINUTE)! + MINUTE - now);
      }
      expect(mostAdmittedInAnyMinute(admissions)).toBe(limits.perMinute);
      // The walk both fills the window and lets it drain: many admissions and many refusals.
      expect(admissions.length).toBeGreaterThan(50);
      expect(admissions.length).toBeLessThan(350);
    });

    it('sliding: the day window stays fixed to the UTC day', async () => {
      const clock = new ManualClock(Date.UTC(2026, 0, 1, 23, 59, 30));
      const limiter = await create(clock, 'sliding');
      const limits = { perMinute: 100, perDay: 5 };
      expect(admitted(await burst(limiter, 'k1', limits, 6))).toBe(5);
      clock.set(Date.UTC(2026, 0, 2, 0, 0, 1));
      const decisions = await burst(limiter, 'k1', limits, 3);
      expect(admitted(decisions)).toBe(3);
      expect(decisions[2]!.outcome === 'allowed' && decisions[2]!.day).toEqual({
        limit: 5,
        remaining: 2,
        resetAt: Date.UTC(2026, 0, 3),
      });
      // The sliding minute still holds the 5 of 23:59:30.
      expect(decisions[2]!.outcome === 'allowed' && decisions[2]!.minute.remaining).toBe(92);
    });

    it('sliding: usage reads both windows and consumes nothing', async () => {
      const clock = new ManualClock(AT_58);
      const limiter = await create(clock, 'sliding');
      const limits = { perMinute: 3, perDay: 10 };
      const fresh = await limiter.usage({ keyId: 'k1' }, limits);
      expect(fresh.minute).toEqual({ limit: 3, remaining: 3, resetAt: AT_58 + MINUTE });
      await burst(limiter, 'k1', limits, 2);
      clock.advance(5 * SECOND);
      for (let i = 0; i < 5; i++) {
        const usage = await limiter.usage({ keyId: 'k1' }, limits);
        expect(usage).toEqual({
          minute: { limit: 3, remaining: 1, resetAt: AT_58 + MINUTE },
          day: { limit: 10, remaining: 8, resetAt: Date.UTC(2026, 0, 2) },
          bannedUntil: null,
        });
      }
      clock.set(AT_58 + MINUTE);
      expect((await limiter.usage({ keyId: 'k1' }, limits)).minute).toEqual({
        limit: 3,
        remaining: 3,
        resetAt: AT_58 + 2 * MINUTE,
      });
    });

    for (const shape of ['fixed', 'sliding'] as const) {
      it(`${shape}: shadowed refusals are reported but never ban the key`, async () => {
        const clock = new ManualClock(AT_58 - 30 * SECOND);
        const limiter = await create(clock, shape, DEFAULT_BAN);
        const limits = { perMinute: 2, perDay: 1000 };
        const decisions: KeyDecision[] = [];
        for (let i = 0; i < 30; i++) decisions.push(await limiter.consume({ keyId: 'k1' }, limits, { shadow: true }));
        expect(decisions.map((d) => d.outcome)).toEqual([...Array(2).fill('allowed'), ...Array(28).fill('limited')]);
        expect(decisions.some((d) => d.outcome === 'limited' && d.bannedNow)).toBe(false);
        expect((await limiter.usage({ keyId: 'k1' }, limits)).bannedUntil).toBeNull();
        // The same refusals unshadowed ban the key after the threshold (10) + 1.
        const unshadowed = await burst(limiter, 'k2', limits, 14);
        expect(unshadowed.map((d) => d.outcome)).toEqual([
          ...Array(2).fill('allowed'),
          ...Array(11).fill('limited'),
          'banned',
        ]);
      });
    }
  });
}
