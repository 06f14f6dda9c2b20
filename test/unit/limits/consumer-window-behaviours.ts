import { ManualClock } from '../../../src/shared/clock';
import type {
  BanSettings,
  ConsumerShare,
  KeyDecision,
  KeyLimiter,
  MinuteWindowShape,
  WindowLimits,
} from '../../../src/limits/types';
import { eventually } from '../../support/eventually';

/**
 * What every KeyLimiter does with a consumer's windows (CONTRACT §4), whatever its store: the key's
 * and its consumer's windows all have room or nothing counts, in one decision. Each store's suite
 * calls this with a way to build a fresh limiter (its own namespace) on a ManualClock and a shape.
 */
export interface ConsumerLimiterHarness {
  create(clock: ManualClock, ban: BanSettings, shape: MinuteWindowShape): KeyLimiter | Promise<KeyLimiter>;
}

const BAN: BanSettings = { threshold: 10, windowSeconds: 60, durationSeconds: 900 };
const ROOMY: WindowLimits = { perMinute: 1000, perDay: 100_000 };
/** Noon UTC, 17.5 s into a minute. */
const NOON_PLUS = Date.UTC(2026, 0, 14, 12, 0, 17, 500);

let counter = 0;
function consumerId(): string {
  counter += 1;
  return 'con_' + String(counter).padStart(24, '0');
}

function share(limits: ConsumerShare['limits'], billingDay = 1): ConsumerShare {
  return { id: consumerId(), limits, billingDay };
}

function allowed(decisions: KeyDecision[]): number {
  return decisions.filter((d) => d.outcome === 'allowed').length;
}

export function describeConsumerWindowBehaviours(name: string, harness: ConsumerLimiterHarness): void {
  for (const shape of ['fixed', 'sliding'] as const) {
    describe(`${name}, ${shape} minute: consumer windows`, () => {
      let clock: ManualClock;
      let limiter: KeyLimiter;
      beforeEach(async () => {
        clock = new ManualClock(NOON_PLUS);
        limiter = await harness.create(clock, BAN, shape);
      });
      afterEach(() => limiter.close());

      it('two keys of a consumer with perMinute 10 get 10 answers in all, then the consumer-minute refuses', async () => {
        const c = share({ perMinute: 10 });
        const a = { keyId: 'key_a', consumerId: c.id };
        const b = { keyId: 'key_b', consumerId: c.id };
        const decisions: KeyDecision[] = [];
        for (let i = 0; i < 20; i++) decisions.push(await limiter.consume(i % 2 === 0 ? a : b, ROOMY, { consumer: c }));
        expect(allowed(decisions)).toBe(10);
        const refused = decisions[10]!;
        expect(refused).toMatchObject({
          outcome: 'limited',
          refusedBy: 'consumer-minute',
          consumer: { minute: { limit: 10, remaining: 0 } },
        });
        // The key's own minute counted only its own five.
        expect(decisions[9]).toMatchObject({
          outcome: 'allowed',
          minute: { remaining: 1000 - 5 },
          consumer: { minute: { remaining: 0 } },
        });
        if (refused.outcome === 'limited') expect(refused.retryAfterMs).toBeGreaterThan(0);
        clock.advance(60_000);
        expect(await limiter.consume(a, ROOMY, { consumer: c })).toMatchObject({ outcome: 'allowed' });
      });

      it("a key's own window refusing consumes nothing of its consumer's", async () => {
        const c = share({ perMinute: 10, perDay: 100 });
        const tight = { perMinute: 2, perDay: 100 };
        const a = { keyId: 'key_a', consumerId: c.id };
        for (let i = 0; i < 5; i++) await limiter.consume(a, tight, { consumer: c });
        const usage = await limiter.consumerUsage(c);
        expect(usage.minute).toMatchObject({ limit: 10, remaining: 8 });
        expect(usage.day).toMatchObject({ limit: 100, remaining: 98 });
      });

      it("a consumer's day refuses across keys, and its refusals count toward each key's own ban", async () => {
        const c = share({ perDay: 3 });
        const ids = ['key_a', 'key_b', 'key_c'].map((k) => ({ keyId: k, consumerId: c.id }));
        const decisions: KeyDecision[] = [];
        for (const id of ids) decisions.push(await limiter.consume(id, ROOMY, { consumer: c }));
        expect(allowed(decisions)).toBe(3);
        const refusals: KeyDecision[] = [];
        for (let i = 0; i <= BAN.threshold; i++) refusals.push(await limiter.consume(ids[0]!, ROOMY, { consumer: c }));
        expect(refusals[0]).toMatchObject({ outcome: 'limited', refusedBy: 'consumer-day', bannedNow: false });
        expect(refusals[BAN.threshold]).toMatchObject({ outcome: 'limited', bannedNow: true });
        expect(await limiter.consume(ids[0]!, ROOMY, { consumer: c })).toMatchObject({ outcome: 'banned' });
        // Bans stay per key: the other keys are refused by the consumer's day, not banned.
        expect(await limiter.consume(ids[1]!, ROOMY, { consumer: c })).toMatchObject({
          outcome: 'limited',
          refusedBy: 'consumer-day',
        });
      });

      it('shadowed, a consumer window refusal is reported and never leads to a ban', async () => {
        const c = share({ perMinute: 1 });
        const id = { keyId: 'key_a', consumerId: c.id };
        const decisions: KeyDecision[] = [];
        for (let i = 0; i < BAN.threshold + 5; i++)
          decisions.push(await limiter.consume(id, ROOMY, { consumer: c, shadow: true }));
        expect(allowed(decisions)).toBe(1);
        expect(
          decisions.slice(1).every((d) => d.outcome === 'limited' && d.refusedBy === 'consumer-minute' && !d.bannedNow),
        ).toBe(true);
      });

      it("a consumer's key keeps its own maxInFlight in the same decision: a refusal consumes nothing of either, and a release frees the slot", async () => {
        const c = share({ perMinute: 10 });
        const a = { keyId: 'key_a', consumerId: c.id };
        const lease = (id: string) => ({ consumer: c, inFlight: { max: 2, id, ttlMs: 11_000 } });
        expect(await limiter.consume(a, ROOMY, lease('l1'))).toMatchObject({ outcome: 'allowed' });
        expect(await limiter.consume(a, ROOMY, lease('l2'))).toMatchObject({ outcome: 'allowed' });
        const refused = await limiter.consume(a, ROOMY, lease('l3'));
        // Its windows and its consumer's as the two admitted left them.
        expect(refused).toMatchObject({
          outcome: 'concurrency_limited',
          minute: { remaining: 1000 - 2 },
          consumer: { minute: { limit: 10, remaining: 8 } },
        });
        // Another key of the same consumer has slots of its own.
        expect(await limiter.consume({ keyId: 'key_b', consumerId: c.id }, ROOMY, lease('l4'))).toMatchObject({
          outcome: 'allowed',
          consumer: { minute: { remaining: 7 } },
        });
        limiter.release(a, 'l1');
        // A release is fire and forget (on Redis one command not awaited): the slot is free again soon after.
        await eventually(async () => (await limiter.consume(a, ROOMY, lease('l5'))).outcome === 'allowed', {
          timeoutMs: 5000,
          what: 'the released slot',
        });
      });

      it('costs take units of every window of the key and its consumer', async () => {
        const c = share({ perMinute: 10, perDay: 10 });
        const id = { keyId: 'key_a', consumerId: c.id };
        expect(await limiter.consume(id, ROOMY, { consumer: c, cost: 4 })).toMatchObject({
          outcome: 'allowed',
          minute: { remaining: 996 },
          consumer: { minute: { remaining: 6 }, day: { remaining: 6 } },
        });
        expect(await limiter.consume(id, ROOMY, { consumer: c, cost: 4 })).toMatchObject({
          outcome: 'allowed',
          consumer: { minute: { remaining: 2 } },
        });
        expect(await limiter.consume(id, ROOMY, { consumer: c, cost: 4 })).toMatchObject({
          outcome: 'limited',
          consumer: { minute: { remaining: 2 } },
        });
      });

      it("a consumer's month with credits behaves as a key's: its limit plus the month's credits, on its own billing day", async () => {
        const c = share({ perMonth: 5 }, 10);
        const ids = ['key_a', 'key_b'].map((k) => ({ keyId: k, consumerId: c.id }));
        const decisions: KeyDecision[] = [];
        for (let i = 0; i < 7; i++) decisions.push(await limiter.consume(ids[i % 2]!, ROOMY, { consumer: c }));
        expect(allowed(decisions)).toBe(5);
        const refused = decisions[5]!;
        expect(refused).toMatchObject({
          outcome: 'limited',
          refusedBy: 'consumer-month',
          consumer: { month: { limit: 5, remaining: 0, credits: 0 } },
        });
        // The month started on the 10th at 00:00 UTC and ends on the 10th of the next month.
        if (refused.outcome === 'limited') {
          expect(refused.consumer!.month!.startAt).toBe(Date.UTC(2026, 0, 10));
          expect(refused.consumer!.month!.resetAt).toBe(Date.UTC(2026, 1, 10));
        }
        await limiter.addConsumerCredits(c, 3);
        const more: KeyDecision[] = [];
        for (let i = 0; i < 4; i++) more.push(await limiter.consume(ids[i % 2]!, ROOMY, { consumer: c }));
        expect(allowed(more)).toBe(3);
        expect(more[3]).toMatchObject({
          outcome: 'limited',
          refusedBy: 'consumer-month',
          consumer: { month: { limit: 8, remaining: 0, credits: 3 } },
        });
        // The next billing month starts afresh, credits gone.
        clock.set(Date.UTC(2026, 1, 10, 0, 0, 1));
        expect(await limiter.consume(ids[0]!, ROOMY, { consumer: c })).toMatchObject({
          outcome: 'allowed',
          consumer: { month: { limit: 5, remaining: 4, credits: 0 } },
        });
      });

      it('moving a key to another consumer keeps its own windows', async () => {
        const from = share({ perMinute: 100 });
        const to = share({ perMinute: 100 });
        const limits = { perMinute: 5, perDay: 100 };
        for (let i = 0; i < 3; i++)
          await limiter.consume({ keyId: 'key_m', consumerId: from.id }, limits, { consumer: from });
        await limiter.moveWindows({ keyId: 'key_m', consumerId: from.id }, { keyId: 'key_m', consumerId: to.id });
        const decisions: KeyDecision[] = [];
        for (let i = 0; i < 3; i++)
          decisions.push(await limiter.consume({ keyId: 'key_m', consumerId: to.id }, limits, { consumer: to }));
        expect(allowed(decisions)).toBe(2);
        expect(decisions[0]).toMatchObject({ minute: { remaining: 1 }, day: { remaining: 96 } });
        // Moving back to no consumer keeps them too.
        await limiter.moveWindows({ keyId: 'key_m', consumerId: to.id }, { keyId: 'key_m' });
        expect(await limiter.usage({ keyId: 'key_m' }, limits)).toMatchObject({
          minute: { remaining: 0 },
          day: { remaining: 95 },
        });
      });
    });
  }

  describe(`${name}: sliding consumer minute`, () => {
    it('no 60-second interval admits more than the consumer perMinute across its keys', async () => {
      const clock = new ManualClock(NOON_PLUS);
      const limiter = await harness.create(clock, BAN, 'sliding');
      try {
        const c = share({ perMinute: 3 });
        const a = { keyId: 'key_a', consumerId: c.id };
        const b = { keyId: 'key_b', consumerId: c.id };
        await limiter.consume(a, ROOMY, { consumer: c });
        clock.advance(30_000);
        await limiter.consume(b, ROOMY, { consumer: c });
        await limiter.consume(a, ROOMY, { consumer: c });
        // Past the fixed minute's end, still within 60 s of the first admission.
        clock.advance(20_000);
        const refused = await limiter.consume(b, ROOMY, { consumer: c });
        expect(refused).toMatchObject({ outcome: 'limited', refusedBy: 'consumer-minute' });
        if (refused.outcome === 'limited') expect(refused.retryAfterMs).toBe(10_000);
        clock.advance(10_001);
        expect(await limiter.consume(b, ROOMY, { consumer: c })).toMatchObject({
          outcome: 'allowed',
          consumer: { minute: { remaining: 0 } },
        });
      } finally {
        await limiter.close();
      }
    });
  });
}
