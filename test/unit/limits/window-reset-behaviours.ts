import { ManualClock } from '../../../src/shared/clock';
import type {
  ConsumerShare,
  KeyDecision,
  KeyLimiter,
  KeyRef,
  MinuteWindowShape,
  WindowLimits,
} from '../../../src/limits/types';
import { NO_BAN, type ShapedLimiterHarness } from './minute-window-behaviours';

/**
 * What every KeyLimiter does with a window reset (POST /admin/…/windows/reset, CONTRACT §5),
 * whatever its store: the named windows start from zero, the others keep counting, a month keeps
 * its credits, and the answer says what each held. Called by the in-process and Redis suites.
 */

/** 15 March 2026, 12:00:17.5 UTC. */
const NOW = Date.UTC(2026, 2, 15, 12, 0, 17, 500);

async function consumeTimes(
  limiter: KeyLimiter,
  key: KeyRef,
  limits: WindowLimits,
  times: number,
  consumer?: ConsumerShare,
): Promise<KeyDecision[]> {
  const decisions: KeyDecision[] = [];
  for (let i = 0; i < times; i++)
    decisions.push(await limiter.consume(key, limits, consumer ? { consumer } : undefined));
  return decisions;
}

const outcomes = (decisions: KeyDecision[]) => decisions.map((d) => d.outcome);
let counter = 0;

export function describeWindowResetBehaviours(name: string, harness: ShapedLimiterHarness): void {
  for (const shape of ['fixed', 'sliding'] as MinuteWindowShape[]) {
    describe(`${name}, ${shape} minute: window reset`, () => {
      let clock: ManualClock;
      let limiter: KeyLimiter;
      let keyId: string;

      beforeEach(async () => {
        clock = new ManualClock(NOW);
        limiter = await harness.create(clock, NO_BAN, shape);
        counter += 1;
        keyId = `key_reset_${counter}`;
      });
      afterEach(() => limiter.close());

      it('a full minute reset answers the 5 it held and admits 5 more at once; the day and month keep counting', async () => {
        const limits: WindowLimits = { perMinute: 5, perDay: 100, perMonth: 1000 };
        expect(outcomes(await consumeTimes(limiter, { keyId }, limits, 6))).toEqual([
          'allowed',
          'allowed',
          'allowed',
          'allowed',
          'allowed',
          'limited',
        ]);
        expect(await limiter.resetWindows({ keyId }, ['minute'])).toEqual({ minute: 5 });
        const after = await consumeTimes(limiter, { keyId }, limits, 6);
        expect(outcomes(after)).toEqual(['allowed', 'allowed', 'allowed', 'allowed', 'allowed', 'limited']);
        const usage = await limiter.usage({ keyId }, limits);
        expect(usage.minute.remaining).toBe(0);
        expect(usage.day.remaining).toBe(90);
        expect(usage.month!.remaining).toBe(990);
      });

      it('a day reset answers what the day held; the minute is left as it was', async () => {
        const limits: WindowLimits = { perMinute: 50, perDay: 4 };
        expect(outcomes(await consumeTimes(limiter, { keyId }, limits, 5)).at(-1)).toBe('limited');
        expect(await limiter.resetWindows({ keyId }, ['day'])).toEqual({ day: 4 });
        const usage = await limiter.usage({ keyId }, limits);
        expect(usage.day.remaining).toBe(4);
        expect(usage.minute.remaining).toBe(46);
        // Counted in the minute too, in the same instant as those before the reset.
        expect(await limiter.consume({ keyId }, limits)).toMatchObject({
          outcome: 'allowed',
          minute: { remaining: 45 },
          day: { remaining: 3 },
        });
        expect((await limiter.usage({ keyId }, limits)).minute.remaining).toBe(45);
      });

      it("a month reset sets its count to zero and keeps the month's credits", async () => {
        const limits: WindowLimits = { perMinute: 1000, perDay: 1000, perMonth: 3 };
        await limiter.addCredits({ keyId }, 2);
        expect(outcomes(await consumeTimes(limiter, { keyId }, limits, 6)).at(-1)).toBe('limited');
        expect(await limiter.resetWindows({ keyId }, ['month'])).toEqual({ month: 5 });
        const usage = await limiter.usage({ keyId }, limits);
        expect(usage.month).toMatchObject({ limit: 5, remaining: 5, credits: 2 });
        expect(usage.day.remaining).toBe(995);
      });

      it('all three at once; a key never used held nothing', async () => {
        const limits: WindowLimits = { perMinute: 10, perDay: 10, perMonth: 10 };
        expect(await limiter.resetWindows({ keyId: 'key_never_used' }, ['minute', 'day', 'month'])).toEqual({
          minute: 0,
          day: 0,
          month: 0,
        });
        await consumeTimes(limiter, { keyId }, limits, 3);
        clock.advance(61_000);
        await consumeTimes(limiter, { keyId }, limits, 2);
        // The minute holds the two of this minute; the day and month all five.
        expect(await limiter.resetWindows({ keyId }, ['minute', 'day', 'month'])).toEqual({
          minute: 2,
          day: 5,
          month: 5,
        });
        const usage = await limiter.usage({ keyId }, limits);
        expect([usage.minute.remaining, usage.day.remaining, usage.month!.remaining]).toEqual([10, 10, 10]);
      });

      it('a reset leaves a ban where it is (DELETE …/ban lifts it)', async () => {
        const ban = { threshold: 1, windowSeconds: 60, durationSeconds: 900 };
        const banning = await harness.create(clock, ban, shape);
        try {
          const limits: WindowLimits = { perMinute: 1, perDay: 100 };
          expect(outcomes(await consumeTimes(banning, { keyId }, limits, 4))).toEqual([
            'allowed',
            'limited',
            'limited',
            'banned',
          ]);
          expect(await banning.resetWindows({ keyId }, ['minute', 'day'])).toEqual({ minute: 1, day: 1 });
          expect((await banning.consume({ keyId }, limits)).outcome).toBe('banned');
        } finally {
          await banning.close();
        }
      });

      it("a consumer's minute reset: its keys are admitted again, their own windows keep their counts", async () => {
        const consumer: ConsumerShare = {
          id: `con_reset_${counter}_${shape}`,
          limits: { perMinute: 4, perDay: 100, perMonth: 50 },
          billingDay: 1,
        };
        const a = { keyId: 'key_a', consumerId: consumer.id };
        const b = { keyId: 'key_b', consumerId: consumer.id };
        const roomy: WindowLimits = { perMinute: 100, perDay: 100 };
        await consumeTimes(limiter, a, roomy, 2, consumer);
        const third = await consumeTimes(limiter, b, roomy, 3, consumer);
        expect(third.at(-1)).toMatchObject({ outcome: 'limited', refusedBy: 'consumer-minute' });
        await limiter.addConsumerCredits(consumer, 7);
        expect(await limiter.resetConsumerWindows(consumer, ['minute', 'month'])).toEqual({ minute: 4, month: 4 });
        const again = await limiter.consume(a, roomy, { consumer });
        expect(again).toMatchObject({
          outcome: 'allowed',
          minute: { remaining: 97 },
          consumer: {
            minute: { remaining: 3 },
            day: { remaining: 95 },
            month: { limit: 57, remaining: 56, credits: 7 },
          },
        });
        expect(await limiter.resetConsumerWindows(consumer, ['day'])).toEqual({ day: 5 });
        expect(await limiter.consumerUsage(consumer)).toMatchObject({
          minute: { remaining: 3 },
          day: { remaining: 100 },
          month: { remaining: 56 },
        });
      });
    });
  }
}
