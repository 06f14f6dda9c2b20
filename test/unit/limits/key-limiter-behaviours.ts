import { ManualClock } from '../../../src/shared/clock';
import type { BanSettings, KeyDecision, KeyLimiter, WindowLimits } from '../../../src/limits/types';

/**
 * What every KeyLimiter does, whatever its store. Each implementation's suite calls
 * `describeKeyLimiterBehaviours` with a way to build a fresh limiter on a ManualClock.
 */
export interface KeyLimiterHarness {
  create(clock: ManualClock, ban: BanSettings): KeyLimiter | Promise<KeyLimiter>;
}

/** The config defaults (CONTRACT §4). */
export const DEFAULT_BAN: BanSettings = { threshold: 10, windowSeconds: 60, durationSeconds: 900 };

const FREE: WindowLimits = { perMinute: 60, perDay: 1000 };
const MINUTE = 60_000;
/** Noon UTC, 17.5 s into a minute: minute and day boundaries are both some way off. */
const NOON_PLUS = Date.UTC(2026, 0, 1, 12, 0, 17, 500);

export async function consumeTimes(
  limiter: KeyLimiter,
  keyId: string,
  limits: WindowLimits,
  times: number,
): Promise<KeyDecision[]> {
  const decisions: KeyDecision[] = [];
  for (let i = 0; i < times; i++) decisions.push(await limiter.consume({ keyId }, limits));
  return decisions;
}

function expectLimited(decision: KeyDecision): Extract<KeyDecision, { outcome: 'limited' }> {
  expect(decision.outcome).toBe('limited');
  if (decision.outcome !== 'limited') throw new Error('unreachable');
  return decision;
}

function expectAllowed(decision: KeyDecision): Extract<KeyDecision, { outcome: 'allowed' }> {
  expect(decision.outcome).toBe('allowed');
  if (decision.outcome !== 'allowed') throw new Error('unreachable');
  return decision;
}

export function describeKeyLimiterBehaviours(name: string, harness: KeyLimiterHarness): void {
  describe(`${name}: KeyLimiter behaviours`, () => {
    let clock: ManualClock;
    let limiter: KeyLimiter;

    async function setUp(start: number, ban: BanSettings = DEFAULT_BAN): Promise<void> {
      clock = new ManualClock(start);
      limiter = await harness.create(clock, ban);
    }

    afterEach(async () => {
      await limiter?.close();
    });

    describe('minute window', () => {
      it('serves 60 of a 60/min key, refuses the 61st until the minute boundary, then serves again', async () => {
        await setUp(NOON_PLUS);
        const served = await consumeTimes(limiter, 'k1', FREE, 60);
        served.forEach((d, i) => {
          const allowed = expectAllowed(d);
          expect(allowed.minute).toEqual({ limit: 60, remaining: 59 - i, resetAt: Date.UTC(2026, 0, 1, 12, 1) });
          expect(allowed.day).toEqual({ limit: 1000, remaining: 999 - i, resetAt: Date.UTC(2026, 0, 2) });
          expect(allowed.now).toBe(NOON_PLUS);
        });

        const refused = expectLimited(await limiter.consume({ keyId: 'k1' }, FREE));
        expect(refused.refusedBy).toBe('minute');
        expect(refused.retryAfterMs).toBe(42_500);
        expect(refused.minute).toEqual({ limit: 60, remaining: 0, resetAt: Date.UTC(2026, 0, 1, 12, 1) });
        expect(refused.day.remaining).toBe(940);
        expect(refused.bannedNow).toBe(false);

        clock.set(NOON_PLUS + 42_499);
        expectLimited(await limiter.consume({ keyId: 'k1' }, FREE));

        clock.set(refused.minute.resetAt);
        const again = expectAllowed(await limiter.consume({ keyId: 'k1' }, FREE));
        expect(again.minute).toEqual({ limit: 60, remaining: 59, resetAt: Date.UTC(2026, 0, 1, 12, 2) });
        expect(again.day.remaining).toBe(939);
      });

      it('aligns the minute window to the UTC minute, not to the first request', async () => {
        await setUp(Date.UTC(2026, 0, 1, 12, 0, 59, 900));
        const limits = { perMinute: 1, perDay: 1000 };
        expectAllowed(await limiter.consume({ keyId: 'k1' }, limits));
        expect(expectLimited(await limiter.consume({ keyId: 'k1' }, limits)).retryAfterMs).toBe(100);
        clock.advance(100);
        expectAllowed(await limiter.consume({ keyId: 'k1' }, limits));
      });
    });

    describe('day window', () => {
      it('refuses the 6th request of a 5/day key until UTC midnight, then serves again', async () => {
        await setUp(Date.UTC(2026, 0, 1, 15, 30, 10, 250));
        const limits = { perMinute: 100, perDay: 5 };
        const served = await consumeTimes(limiter, 'k1', limits, 5);
        served.forEach((d, i) => expect(expectAllowed(d).day.remaining).toBe(4 - i));

        const refused = expectLimited(await limiter.consume({ keyId: 'k1' }, limits));
        expect(refused.refusedBy).toBe('day');
        expect(refused.day).toEqual({ limit: 5, remaining: 0, resetAt: Date.UTC(2026, 0, 2) });
        expect(refused.retryAfterMs).toBe(Date.UTC(2026, 0, 2) - clock.now());

        // Later minutes of the same day are still refused.
        clock.set(Date.UTC(2026, 0, 1, 23, 59, 59, 999));
        expect(expectLimited(await limiter.consume({ keyId: 'k1' }, limits)).retryAfterMs).toBe(1);

        clock.set(Date.UTC(2026, 0, 2));
        const again = expectAllowed(await limiter.consume({ keyId: 'k1' }, limits));
        expect(again.day).toEqual({ limit: 5, remaining: 4, resetAt: Date.UTC(2026, 0, 3) });
      });

      it('names the day when both windows are exhausted, with the wait to midnight', async () => {
        await setUp(NOON_PLUS);
        const limits = { perMinute: 3, perDay: 3 };
        await consumeTimes(limiter, 'k1', limits, 3);
        const refused = expectLimited(await limiter.consume({ keyId: 'k1' }, limits));
        expect(refused.refusedBy).toBe('day');
        expect(refused.minute.remaining).toBe(0);
        expect(refused.retryAfterMs).toBe(Date.UTC(2026, 0, 2) - NOON_PLUS);
      });
    });

    describe('refusals and usage', () => {
      it('leaves both counts unchanged when it refuses', async () => {
        await setUp(NOON_PLUS);
        const limits = { perMinute: 2, perDay: 10 };
        await consumeTimes(limiter, 'k1', limits, 2);
        const before = await limiter.usage({ keyId: 'k1' }, limits);
        expect(before.minute.remaining).toBe(0);
        expect(before.day.remaining).toBe(8);

        for (let i = 0; i < 5; i++) expectLimited(await limiter.consume({ keyId: 'k1' }, limits));
        expect(await limiter.usage({ keyId: 'k1' }, limits)).toEqual(before);

        // Nothing refused was counted: the next minute has its full allowance and the day lost only 2.
        clock.advance(MINUTE);
        const next = expectAllowed(await limiter.consume({ keyId: 'k1' }, limits));
        expect(next.minute.remaining).toBe(1);
        expect(next.day.remaining).toBe(7);
      });

      it('reports usage without consuming, and full windows for an unknown key', async () => {
        await setUp(NOON_PLUS);
        const fresh = await limiter.usage({ keyId: 'never-seen' }, FREE);
        expect(fresh).toEqual({
          minute: { limit: 60, remaining: 60, resetAt: Date.UTC(2026, 0, 1, 12, 1) },
          day: { limit: 1000, remaining: 1000, resetAt: Date.UTC(2026, 0, 2) },
          bannedUntil: null,
        });
        await consumeTimes(limiter, 'k1', FREE, 3);
        const usage = await limiter.usage({ keyId: 'k1' }, FREE);
        expect(usage.minute.remaining).toBe(57);
        expect(await limiter.usage({ keyId: 'k1' }, FREE)).toEqual(usage);
        expect(expectAllowed(await limiter.consume({ keyId: 'k1' }, FREE)).minute.remaining).toBe(56);
      });

      it('shows a new minute as fresh in usage while the day keeps its count', async () => {
        await setUp(NOON_PLUS);
        await consumeTimes(limiter, 'k1', FREE, 4);
        clock.advance(MINUTE);
        const usage = await limiter.usage({ keyId: 'k1' }, FREE);
        expect(usage.minute).toEqual({ limit: 60, remaining: 60, resetAt: Date.UTC(2026, 0, 1, 12, 2) });
        expect(usage.day.remaining).toBe(996);
      });

      it('keeps keys apart', async () => {
        await setUp(NOON_PLUS);
        const limits = { perMinute: 1, perDay: 10 };
        expectAllowed(await limiter.consume({ keyId: 'a' }, limits));
        expectLimited(await limiter.consume({ keyId: 'a' }, limits));
        expectAllowed(await limiter.consume({ keyId: 'b' }, limits));
      });

      it('applies limits as given on each call: lowered below the count, it refuses with nothing remaining', async () => {
        await setUp(NOON_PLUS);
        await consumeTimes(limiter, 'k1', FREE, 10);
        const refused = expectLimited(await limiter.consume({ keyId: 'k1' }, { perMinute: 5, perDay: 1000 }));
        expect(refused.refusedBy).toBe('minute');
        expect(refused.minute).toEqual({ limit: 5, remaining: 0, resetAt: Date.UTC(2026, 0, 1, 12, 1) });
        expect(
          expectAllowed(await limiter.consume({ keyId: 'k1' }, { perMinute: 300, perDay: 10_000 })).minute.remaining,
        ).toBe(289);
      });
    });

    describe('bans', () => {
      const limits = { perMinute: 1, perDay: 1000 };

      async function exhaustAndRefuse(refusals: number): Promise<KeyDecision[]> {
        expectAllowed(await limiter.consume({ keyId: 'k1' }, limits));
        return consumeTimes(limiter, 'k1', limits, refusals);
      }

      it('bans on the threshold+1-th refusal within the window; that response is still limited', async () => {
        await setUp(NOON_PLUS);
        const refusals = await exhaustAndRefuse(11);
        refusals.slice(0, 10).forEach((d) => expect(expectLimited(d).bannedNow).toBe(false));
        const eleventh = expectLimited(refusals[10]!);
        expect(eleventh.bannedNow).toBe(true);
        expect(eleventh.retryAfterMs).toBe(42_500);

        const banned = await limiter.consume({ keyId: 'k1' }, limits);
        expect(banned).toEqual({ outcome: 'banned', bannedUntil: NOON_PLUS + 900_000, now: NOON_PLUS });
        expect((await limiter.usage({ keyId: 'k1' }, limits)).bannedUntil).toBe(NOON_PLUS + 900_000);
      });

      it('answers every request banned while the ban lasts, counting nothing, and serves again when it ends', async () => {
        await setUp(NOON_PLUS);
        await exhaustAndRefuse(11);
        const bannedUntil = NOON_PLUS + 900_000;

        for (const at of [NOON_PLUS + MINUTE, NOON_PLUS + 5 * MINUTE, bannedUntil - 1]) {
          clock.set(at);
          expect(await limiter.consume({ keyId: 'k1' }, limits)).toEqual({ outcome: 'banned', bannedUntil, now: at });
        }
        const usage = await limiter.usage({ keyId: 'k1' }, limits);
        expect(usage.minute.remaining).toBe(1);
        expect(usage.day.remaining).toBe(999);
        expect(usage.bannedUntil).toBe(bannedUntil);

        clock.set(bannedUntil);
        expect((await limiter.usage({ keyId: 'k1' }, limits)).bannedUntil).toBeNull();
        expectAllowed(await limiter.consume({ keyId: 'k1' }, limits));
      });

      it('starts counting afresh after a ban: the next ban takes threshold+1 refusals again', async () => {
        await setUp(NOON_PLUS);
        await exhaustAndRefuse(11);
        clock.set(NOON_PLUS + 900_000);
        const refusals = await exhaustAndRefuse(11);
        expect(refusals.map((d) => d.outcome === 'limited' && d.bannedNow)).toEqual([...Array(10).fill(false), true]);
      });

      it('lifts a ban on unban, and forgets the refusals counted so far', async () => {
        await setUp(NOON_PLUS);
        await exhaustAndRefuse(11);
        expect((await limiter.consume({ keyId: 'k1' }, limits)).outcome).toBe('banned');

        await limiter.unban({ keyId: 'k1' });
        expect((await limiter.usage({ keyId: 'k1' }, limits)).bannedUntil).toBeNull();
        // Still over the minute limit, so limited, and counting toward a ban from zero.
        const afterUnban = await consumeTimes(limiter, 'k1', limits, 11);
        expect(afterUnban.map((d) => d.outcome === 'limited' && d.bannedNow)).toEqual([...Array(10).fill(false), true]);
      });

      it('unban clears refusals below the threshold too, and is harmless on an unknown key', async () => {
        await setUp(NOON_PLUS);
        await exhaustAndRefuse(10);
        await limiter.unban({ keyId: 'k1' });
        await limiter.unban({ keyId: 'never-seen' });
        const next = await consumeTimes(limiter, 'k1', limits, 10);
        next.forEach((d) => expect(expectLimited(d).bannedNow).toBe(false));
        expect(expectLimited(await limiter.consume({ keyId: 'k1' }, limits)).bannedNow).toBe(true);
      });

      it('expires the refusal count ban.windowSeconds after the first refusal', async () => {
        await setUp(NOON_PLUS);
        const dayLimited = { perMinute: 100, perDay: 1 };
        expectAllowed(await limiter.consume({ keyId: 'k1' }, dayLimited));
        const first = await consumeTimes(limiter, 'k1', dayLimited, 10);
        first.forEach((d) => expect(expectLimited(d).bannedNow).toBe(false));

        clock.advance(60_000);
        const second = await consumeTimes(limiter, 'k1', dayLimited, 10);
        second.forEach((d) => expect(expectLimited(d).bannedNow).toBe(false));
        expect(expectLimited(await limiter.consume({ keyId: 'k1' }, dayLimited)).bannedNow).toBe(true);
      });

      it('keeps the refusal window fixed from its first refusal: inside it the threshold+1-th refusal bans', async () => {
        await setUp(NOON_PLUS);
        const dayLimited = { perMinute: 100, perDay: 1 };
        expectAllowed(await limiter.consume({ keyId: 'k1' }, dayLimited));
        await consumeTimes(limiter, 'k1', dayLimited, 5);
        clock.advance(59_999);
        const later = await consumeTimes(limiter, 'k1', dayLimited, 6);
        expect(later.map((d) => d.outcome === 'limited' && d.bannedNow)).toEqual([
          false,
          false,
          false,
          false,
          false,
          true,
        ]);
      });

      it('bans by the settings given: threshold, window and duration', async () => {
        await setUp(NOON_PLUS, { threshold: 2, windowSeconds: 10, durationSeconds: 30 });
        const refusals = await exhaustAndRefuse(3);
        expect(refusals.map((d) => d.outcome === 'limited' && d.bannedNow)).toEqual([false, false, true]);
        expect(await limiter.consume({ keyId: 'k1' }, limits)).toEqual({
          outcome: 'banned',
          bannedUntil: NOON_PLUS + 30_000,
          now: NOON_PLUS,
        });
        clock.advance(30_000);
        expect((await limiter.consume({ keyId: 'k1' }, limits)).outcome).not.toBe('banned');
      });

      it('outlives midnight: a ban set late in the day holds into the next one', async () => {
        const lateStart = Date.UTC(2026, 0, 1, 23, 59, 30);
        await setUp(lateStart);
        await exhaustAndRefuse(11);
        clock.set(Date.UTC(2026, 0, 2, 0, 10));
        expect(await limiter.consume({ keyId: 'k1' }, limits)).toEqual({
          outcome: 'banned',
          bannedUntil: lateStart + 900_000,
          now: clock.now(),
        });
        clock.set(lateStart + 900_000);
        expectAllowed(await limiter.consume({ keyId: 'k1' }, limits));
      });
    });
  });
}
