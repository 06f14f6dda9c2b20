import { ManualClock } from '../../../../src/shared/clock';
import { MemoryKeyLimiter } from '../../../../src/limits';
import { PlanBook, type Plans } from '../../../../src/limits/plan-limits';
import type { KeyDecision, KeyLimiter, WindowLimits, WindowState } from '../../../../src/limits/types';
import type { ApiKeyRecord } from '../../../../src/keys/types';
import { createKeyLimitStep } from '../../../../src/gateway/steps/limit-key';
import { Refusal } from '../../../../src/gateway/refusals';
import { CONTINUE } from '../../../../src/gateway/step-outcome';
import { mockKeyLimiter, type MockedKeyLimiter } from '../../limits/key-limiter-fake';
import { matchRoute } from '../../../../src/gateway/operations/routes';
import { OperationCosts } from '../../../../src/gateway/operations/operation-costs';
import {
  NOW,
  counted,
  countedInAll,
  gatewayRequest,
  headersStartingWith,
  incoming,
  keyRecord,
  stepEnvironment,
} from './step-kit';
import type { CostConfig } from '../../../../src/shared/config';

const PLANS: Plans = {
  free: { perMinute: 10, perDay: 1000 },
  trial: { perMinute: 10, perDay: 1000, shadow: true },
  enterprise: {},
};
const FREE_LIMITS: WindowLimits = { perMinute: 10, perDay: 1000 };
const MINUTE_RESET = NOW + 60_000;
const DAY_RESET = Date.UTC(2026, 2, 11);
const BANNED_MESSAGE = 'This API key is temporarily banned for retrying after 429 responses. Use exponential backoff.';

const minute = (remaining: number): WindowState => ({ limit: 10, remaining, resetAt: MINUTE_RESET });
const day = (remaining: number, limit = 1000): WindowState => ({ limit, remaining, resetAt: DAY_RESET });

/** A key limiter that answers one fixed decision; usage and the rest are not this step's business. */
function fixedKeyLimiter(decision: KeyDecision | Error): MockedKeyLimiter {
  return mockKeyLimiter({
    consume: jest.fn(async () => {
      if (decision instanceof Error) throw decision;
      return decision;
    }),
  });
}

function setUp(keyLimiter: KeyLimiter, record: ApiKeyRecord = keyRecord(), costs: CostConfig[] = []) {
  const env = stepEnvironment();
  const retryAfter = jest.fn((waitMs: number) => `${Math.ceil(waitMs / 1000)}+jitter`);
  const plans = new PlanBook(PLANS);
  const limitKey = createKeyLimitStep({
    keyLimiter,
    keyLimits: (key) => plans.limitsOf(key),
    plans,
    metrics: env.metrics,
    logger: env.logger,
    storeCall: env.storeCall,
    retryAfter,
    costs: new OperationCosts(costs),
  });
  /** A request authenticated with `record`, its operation matched. */
  const fresh = (method = 'GET') => {
    const request = gatewayRequest(incoming(method, '/v1/pets'), {
      route: matchRoute('/v1/pets'),
      key: record,
      keyId: record.id,
      plan: record.plan,
    });
    return { request, res: request.res };
  };
  return { ...env, retryAfter, limitKey, record, fresh, ...fresh() };
}

const limited = (refusedBy: 'minute' | 'day', bannedNow = false): KeyDecision => ({
  outcome: 'limited',
  refusedBy,
  minute: minute(refusedBy === 'minute' ? 0 : 7),
  day: day(refusedBy === 'day' ? 0 : 500),
  retryAfterMs: refusedBy === 'minute' ? 25_000 : 3_600_000,
  bannedNow,
  now: NOW,
});
const banned: KeyDecision = { outcome: 'banned', bannedUntil: NOW + 299_500, now: NOW };

describe('key limit step', () => {
  it("asks the limiter for a consumer's key by its id and its consumer's, never by a store's name for them", async () => {
    const limiter = fixedKeyLimiter({ outcome: 'allowed', minute: minute(6), day: day(900), now: NOW });
    const record = keyRecord({ consumerId: 'con_0123456789abcdef01234567' });
    const { limitKey, request } = setUp(limiter, record);
    expect(await limitKey(request)).toBe(CONTINUE);
    expect(limiter.consume).toHaveBeenCalledWith(
      { keyId: record.id, consumerId: 'con_0123456789abcdef01234567' },
      FREE_LIMITS,
      undefined,
    );
  });

  it('an allowed request continues with both windows in the headers, the binding one in X-RateLimit-*', async () => {
    const limiter = fixedKeyLimiter({ outcome: 'allowed', minute: minute(6), day: day(900), now: NOW });
    const { limitKey, res, request, record, metrics } = setUp(limiter);
    expect(await limitKey(request)).toBe(CONTINUE);
    expect(limiter.consume).toHaveBeenCalledWith({ keyId: record.id }, FREE_LIMITS, undefined);
    expect(headersStartingWith(res, 'x-ratelimit', 'ratelimit', 'retry-after')).toEqual({
      'x-ratelimit-limit': '10',
      'x-ratelimit-remaining': '6',
      'x-ratelimit-reset': String(MINUTE_RESET / 1000),
      'ratelimit-policy': '"minute";q=10;w=60, "day";q=1000;w=86400',
      ratelimit: `"minute";r=6;t=60, "day";r=900;t=${(DAY_RESET - NOW) / 1000}`,
    });
    expect(request).toMatchObject({ rateLimitOutcome: 'allowed', storeFallback: null });
    expect(await countedInAll(metrics.nearLimit)).toBe(0);
    expect(await countedInAll(metrics.rejections)).toBe(0);
  });

  it('counts near_limit once per window: on the request that takes it to 80 %', async () => {
    const clock = new ManualClock(NOW);
    const limiter = new MemoryKeyLimiter({
      ban: { threshold: 5, windowSeconds: 60, durationSeconds: 300 },
      clock,
      sweepIntervalMs: 0,
    });
    const { limitKey, metrics, fresh } = setUp(limiter);
    const nearAfter: number[] = [];
    for (let n = 1; n <= 10; n++) {
      const { request } = fresh();
      expect(await limitKey(request)).toBe(CONTINUE);
      nearAfter.push(await counted(metrics.nearLimit, { plan: 'free', window: 'minute' }));
    }
    // The 8th of 10 takes the minute to 80 %; the 9th and 10th are past it and not counted again.
    expect(nearAfter).toEqual([0, 0, 0, 0, 0, 0, 0, 1, 1, 1]);
    expect(await counted(metrics.nearLimit, { plan: 'free', window: 'day' })).toBe(0);
  });

  it('counts near_limit for the day window too', async () => {
    const limiter = fixedKeyLimiter({ outcome: 'allowed', minute: minute(9), day: day(20, 100), now: NOW });
    const { limitKey, request, metrics } = setUp(limiter);
    await limitKey(request);
    expect(await counted(metrics.nearLimit, { plan: 'free', window: 'day' })).toBe(1);
    expect(await counted(metrics.nearLimit, { plan: 'free', window: 'minute' })).toBe(0);
  });

  it('a request over the minute limit gets 429 rate_limited with the minute window and a jittered Retry-After', async () => {
    const { limitKey, res, request, metrics, retryAfter } = setUp(fixedKeyLimiter(limited('minute')));
    const outcome = await limitKey(request);
    expect(outcome).toEqual(
      new Refusal(
        'rate_limited',
        'The minute limit of this API key is used up.',
        { 'Retry-After': '25+jitter' },
        undefined,
        { window: 'minute' },
      ),
    );
    expect(retryAfter).toHaveBeenCalledWith(25_000);
    expect(res.getHeader('x-ratelimit-limit')).toBe('10');
    expect(res.getHeader('x-ratelimit-remaining')).toBe('0');
    expect(res.getHeader('x-ratelimit-reset')).toBe(String(MINUTE_RESET / 1000));
    expect(request.rateLimitOutcome).toBe('limited');
    expect(await counted(metrics.rejections, { plan: 'free', window: 'minute' })).toBe(1);
    expect(await countedInAll(metrics.keyBans)).toBe(0);
  });

  it('a request over the day limit shows the day window, whose reset is when the key is served again', async () => {
    const { limitKey, res, request, metrics } = setUp(fixedKeyLimiter(limited('day')));
    const outcome = await limitKey(request);
    expect(outcome).toEqual(
      new Refusal(
        'rate_limited',
        'The day limit of this API key is used up.',
        { 'Retry-After': '3600+jitter' },
        undefined,
        { window: 'day' },
      ),
    );
    expect(res.getHeader('x-ratelimit-limit')).toBe('1000');
    expect(res.getHeader('x-ratelimit-remaining')).toBe('0');
    expect(res.getHeader('x-ratelimit-reset')).toBe(String(DAY_RESET / 1000));
    expect(await counted(metrics.rejections, { plan: 'free', window: 'day' })).toBe(1);
  });

  it('the refusal that bans the key counts a ban', async () => {
    const { limitKey, request, metrics } = setUp(fixedKeyLimiter(limited('minute', true)));
    expect(await limitKey(request)).toMatchObject({ code: 'rate_limited' });
    expect(await counted(metrics.keyBans, { plan: 'free' })).toBe(1);
  });

  it('a banned key gets 429 temporarily_banned: nothing remaining until the ban ends', async () => {
    const { limitKey, res, request, metrics, retryAfter } = setUp(fixedKeyLimiter(banned));
    const outcome = await limitKey(request);
    expect(outcome).toEqual(new Refusal('temporarily_banned', BANNED_MESSAGE, { 'Retry-After': '300+jitter' }));
    expect(retryAfter).toHaveBeenCalledWith(299_500);
    expect(headersStartingWith(res, 'x-ratelimit', 'ratelimit')).toEqual({
      'x-ratelimit-limit': '10',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(Math.ceil((NOW + 299_500) / 1000)),
      'ratelimit-policy': '"minute";q=10;w=60, "day";q=1000;w=86400',
      ratelimit: '"minute";r=0;t=300, "day";r=0;t=300',
    });
    expect(request.rateLimitOutcome).toBe('banned');
    expect(await counted(metrics.rejections, { plan: 'free', window: 'ban' })).toBe(1);
    expect(await countedInAll(metrics.keyBans)).toBe(0);
  });

  it('with the in-process limiter: refusals past the threshold ban the key, and the next request meets the ban', async () => {
    const clock = new ManualClock(NOW);
    const limiter = new MemoryKeyLimiter({
      ban: { threshold: 2, windowSeconds: 60, durationSeconds: 300 },
      clock,
      sweepIntervalMs: 0,
    });
    const { limitKey, metrics, fresh } = setUp(limiter);
    const codes: string[] = [];
    for (let n = 0; n < 14; n++) {
      const { request } = fresh();
      const outcome = await limitKey(request);
      codes.push(outcome instanceof Refusal ? outcome.code : 'continue');
    }
    expect(codes).toEqual([
      ...Array<string>(10).fill('continue'),
      'rate_limited',
      'rate_limited',
      'rate_limited',
      'temporarily_banned',
    ]);
    expect(await counted(metrics.keyBans, { plan: 'free' })).toBe(1);
    expect(await counted(metrics.rejections, { plan: 'free', window: 'minute' })).toBe(3);
    expect(await counted(metrics.rejections, { plan: 'free', window: 'ban' })).toBe(1);
  });

  it('a shadowed plan forwards what the limit would refuse: its headers, no Retry-After, counted and logged', async () => {
    const limiter = fixedKeyLimiter(limited('minute'));
    const { limitKey, res, request, metrics, lines, retryAfter } = setUp(limiter, keyRecord({ plan: 'trial' }));
    expect(await limitKey(request)).toBe(CONTINUE);
    expect(limiter.consume).toHaveBeenCalledWith({ keyId: expect.any(String) }, FREE_LIMITS, { shadow: true });
    expect(res.getHeader('x-ratelimit-remaining')).toBe('0');
    expect(res.getHeader('x-ratelimit-reset')).toBe(String(MINUTE_RESET / 1000));
    expect(res.getHeader('retry-after')).toBeUndefined();
    expect(retryAfter).not.toHaveBeenCalled();
    expect(request.rateLimitOutcome).toBe('shadow_limited');
    expect(await counted(metrics.shadowDenied, { plan: 'trial', window: 'minute' })).toBe(1);
    expect(await countedInAll(metrics.rejections)).toBe(0);
    expect(await countedInAll(metrics.keyBans)).toBe(0);
    expect(lines()).toEqual([
      expect.objectContaining({
        level: 30,
        msg: 'shadow limit would have refused; forwarded',
        requestId: 'req-0001',
        plan: 'trial',
        window: 'minute',
        keyId: request.keyId,
      }),
    ]);
  });

  it('a shadowed ban is forwarded too, with the ban headers, under window "ban"', async () => {
    const { limitKey, res, request, metrics } = setUp(fixedKeyLimiter(banned), keyRecord({ plan: 'trial' }));
    expect(await limitKey(request)).toBe(CONTINUE);
    expect(res.getHeader('ratelimit')).toBe('"minute";r=0;t=300, "day";r=0;t=300');
    expect(res.getHeader('retry-after')).toBeUndefined();
    expect(await counted(metrics.shadowDenied, { plan: 'trial', window: 'ban' })).toBe(1);
  });

  it("a key's own shadow setting wins over its plan's, in both directions", async () => {
    const enforcedOnShadowPlan = keyRecord({ plan: 'trial', limits: { perMinute: 5, perDay: 50, shadow: false } });
    const enforced = setUp(fixedKeyLimiter(limited('minute')), enforcedOnShadowPlan);
    expect(await enforced.limitKey(enforced.request)).toMatchObject({ code: 'rate_limited' });

    const shadowedOnPlainPlan = keyRecord({ plan: 'free', limits: { perMinute: 5, perDay: 50, shadow: true } });
    const limiter = fixedKeyLimiter(limited('minute'));
    const shadowed = setUp(limiter, shadowedOnPlainPlan);
    expect(await shadowed.limitKey(shadowed.request)).toBe(CONTINUE);
    expect(limiter.consume).toHaveBeenCalledWith({ keyId: shadowedOnPlainPlan.id }, shadowedOnPlainPlan.limits, {
      shadow: true,
    });
  });

  it('takes the units config costs gives the method and route: a POST costs what POST is set to, a GET stays at 1', async () => {
    const limiter = fixedKeyLimiter({ outcome: 'allowed', minute: minute(5), day: day(995), now: NOW });
    const { limitKey, fresh, record, metrics } = setUp(limiter, keyRecord(), [
      { method: 'POST', path: '/pets', cost: 5 },
    ]);
    expect(await limitKey(fresh('POST').request)).toBe(CONTINUE);
    expect(limiter.consume).toHaveBeenLastCalledWith({ keyId: record.id }, FREE_LIMITS, {
      shadow: false,
      cost: 5,
      billingDay: undefined,
    });
    expect(await counted(metrics.unitsConsumed, { route: '/v1/pets', plan: 'free' })).toBe(5);
    expect(await limitKey(fresh('GET').request)).toBe(CONTINUE);
    expect(limiter.consume).toHaveBeenLastCalledWith({ keyId: record.id }, FREE_LIMITS, undefined);
  });

  it('store.failMode open admits the request, counted as unenforced and written into the request', async () => {
    const { limitKey, request, metrics } = setUp(
      fixedKeyLimiter({ outcome: 'allowed', minute: minute(9), day: day(999), now: NOW, fallback: 'open' }),
    );
    expect(await limitKey(request)).toBe(CONTINUE);
    expect(request.storeFallback).toBe('open');
    expect(await counted(metrics.unenforced, { plan: 'free' })).toBe(1);
  });

  it('store.failMode local is written into the request but enforced, so not counted as unenforced', async () => {
    const { limitKey, request, metrics } = setUp(fixedKeyLimiter({ ...limited('minute'), fallback: 'local' }));
    expect(await limitKey(request)).toMatchObject({ code: 'rate_limited' });
    expect(request.storeFallback).toBe('local');
    expect(await countedInAll(metrics.unenforced)).toBe(0);
  });

  it('a key with neither limits of its own nor a plan that has some is refused 503 rather than guessed, never a 500 (issue 42)', async () => {
    const limiter = fixedKeyLimiter(banned);
    const record = keyRecord({ id: 'key_enterprise', plan: 'enterprise', limits: null });
    const { limitKey, request, fresh, lines } = setUp(limiter, record);
    expect(await limitKey(request)).toEqual(
      new Refusal('service_unavailable', 'The plan "enterprise" of this API key is not configured on this gateway.', {
        'Retry-After': '60',
      }),
    );
    expect(await limitKey(fresh().request)).toMatchObject({ code: 'service_unavailable' });
    // Logged once per plan while this config is in force, not once per request.
    expect(lines().filter((line) => line.plan === 'enterprise' && line.level === 50)).toHaveLength(1);
    expect(limiter.consume).not.toHaveBeenCalled();
  });

  it('a store that throws answers 503 service_unavailable and sets no rate-limit headers', async () => {
    const { limitKey, res, request, metrics } = setUp(fixedKeyLimiter(new Error('store down')));
    const outcome = await limitKey(request);
    expect(outcome).toEqual(
      new Refusal('service_unavailable', 'The gateway cannot reach its store right now. Retry shortly.', {
        'Retry-After': '1',
      }),
    );
    expect(request.rateLimitOutcome).toBe('store_error');
    expect(headersStartingWith(res, 'x-ratelimit', 'ratelimit')).toEqual({});
    expect(await counted(metrics.storeErrors)).toBe(1);
  });
});
