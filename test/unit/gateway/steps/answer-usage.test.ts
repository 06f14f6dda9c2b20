import { ManualClock } from '../../../../src/shared/clock';
import { MemoryKeyLimiter } from '../../../../src/limits';
import { PlanBook } from '../../../../src/limits/plan-limits';
import type { KeyLimiter, KeyUsage } from '../../../../src/limits/types';
import { mockKeyLimiter, type MockedKeyLimiter } from '../../limits/key-limiter-fake';
import type { ApiKeyRecord } from '../../../../src/keys/types';
import { matchRoute, usageRoute } from '../../../../src/gateway/operations/routes';
import { createUsageStep } from '../../../../src/gateway/steps/answer-usage';
import { Refusal } from '../../../../src/gateway/refusals';
import { ANSWERED, CONTINUE } from '../../../../src/gateway/step-outcome';
import { NOW, gatewayRequest, headersStartingWith, incoming, keyRecord, sentFor, stepEnvironment } from './step-kit';

const PLANS = { free: { perMinute: 10, perDay: 1000 }, enterprise: {} };
const MINUTE_RESET = NOW + 60_000;
const DAY_RESET = Date.UTC(2026, 2, 11);
const record = keyRecord({ expiresAt: '2027-01-01T00:00:00.000Z' });

function setUp(keyLimiter: KeyLimiter) {
  const env = stepEnvironment();
  const clock = new ManualClock(NOW);
  const plans = new PlanBook(PLANS);
  const answerUsage = createUsageStep({
    keyLimiter,
    keyLimits: (key) => plans.limitsOf(key),
    clock,
    storeCall: env.storeCall,
  });
  const call = async (method: string, key: ApiKeyRecord = record) => {
    const request = gatewayRequest(incoming(method, '/v1/usage'), {
      route: usageRoute,
      key,
      keyId: key.id,
      plan: key.plan,
    });
    const outcome = await answerUsage(request);
    return { outcome, res: request.res, request, sent: () => sentFor(request) };
  };
  return { ...env, clock, answerUsage, call };
}

function fixedUsage(usage: KeyUsage | Error): MockedKeyLimiter {
  return mockKeyLimiter({
    usage: jest.fn(async () => {
      if (usage instanceof Error) throw usage;
      return usage;
    }),
  });
}

const usage = (bannedUntil: number | null = null): KeyUsage => ({
  minute: { limit: 10, remaining: 4, resetAt: MINUTE_RESET },
  day: { limit: 1000, remaining: 990, resetAt: DAY_RESET },
  bannedUntil,
});

describe('usage step (GET /v1/usage)', () => {
  it('every other route goes on to the key limit, without asking the limiter', async () => {
    const limiter = fixedUsage(usage());
    const { answerUsage } = setUp(limiter);
    const request = gatewayRequest(incoming('GET', '/v1/pets'), { route: matchRoute('/v1/pets'), key: record });
    expect(await answerUsage(request)).toBe(CONTINUE);
    expect(limiter.usage).not.toHaveBeenCalled();
    expect(request.res.headersSent).toBe(false);
  });

  it('answers 200 with the plan, both windows, the ban and the expiry, and the rate-limit headers', async () => {
    const limiter = fixedUsage(usage());
    const { call } = setUp(limiter);
    const { outcome, res, request, sent } = await call('GET');
    expect(outcome).toBe(ANSWERED);
    expect(limiter.usage).toHaveBeenCalledWith({ keyId: record.id }, { perMinute: 10, perDay: 1000 }, undefined);
    expect(limiter.consume).not.toHaveBeenCalled();
    expect(request.rateLimitOutcome).toBe('allowed');
    expect(headersStartingWith(res, 'x-ratelimit', 'ratelimit')).toEqual({
      'x-ratelimit-limit': '10',
      'x-ratelimit-remaining': '4',
      'x-ratelimit-reset': String(MINUTE_RESET / 1000),
      'ratelimit-policy': '"minute";q=10;w=60, "day";q=1000;w=86400',
      ratelimit: `"minute";r=4;t=60, "day";r=990;t=${(DAY_RESET - NOW) / 1000}`,
    });
    const response = await sent();
    expect(response.statusLine).toBe('HTTP/1.1 200 OK');
    expect(response.headers).toMatchObject({
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      'content-length': String(Buffer.byteLength(response.body)),
    });
    expect(JSON.parse(response.body)).toEqual({
      plan: 'free',
      windows: [
        { name: 'minute', limit: 10, remaining: 4, reset: MINUTE_RESET / 1000 },
        { name: 'day', limit: 1000, remaining: 990, reset: DAY_RESET / 1000 },
      ],
      bannedUntil: null,
      expiresAt: '2027-01-01T00:00:00.000Z',
    });
  });

  it('spends no unit: with the in-process limiter, asking twice leaves the windows where consume left them', async () => {
    const clock = new ManualClock(NOW);
    const limiter = new MemoryKeyLimiter({
      ban: { threshold: 3, windowSeconds: 60, durationSeconds: 300 },
      clock,
      sweepIntervalMs: 0,
    });
    await limiter.consume({ keyId: record.id }, { perMinute: 10, perDay: 1000 });
    const { call } = setUp(limiter);
    const remaining = async () => {
      const { sent } = await call('GET');
      return (JSON.parse((await sent()).body) as { windows: Array<{ remaining: number }> }).windows.map(
        (w) => w.remaining,
      );
    };
    expect(await remaining()).toEqual([9, 999]);
    expect(await remaining()).toEqual([9, 999]);
    await limiter.consume({ keyId: record.id }, { perMinute: 10, perDay: 1000 });
    expect(await remaining()).toEqual([8, 998]);
  });

  it('HEAD answers the same headers and no body', async () => {
    const { call } = setUp(fixedUsage(usage()));
    const { outcome, sent } = await call('HEAD');
    expect(outcome).toBe(ANSWERED);
    const response = await sent();
    expect(response.statusLine).toBe('HTTP/1.1 200 OK');
    expect(Number(response.headers['content-length'])).toBeGreaterThan(50);
    expect(response.headers['x-ratelimit-remaining']).toBe('4');
    expect(response.body).toBe('');
  });

  it.each(['POST', 'DELETE'])('%s is refused with 405 and Allow, without asking the limiter', async (method) => {
    const limiter = fixedUsage(usage());
    const { call } = setUp(limiter);
    const { outcome, res, request } = await call(method);
    expect(outcome).toEqual(
      new Refusal('method_not_allowed', `${method} is not allowed here.`, { Allow: 'GET, HEAD' }),
    );
    expect(limiter.usage).not.toHaveBeenCalled();
    expect(request.rateLimitOutcome).toBeNull();
    expect(res.headersSent).toBe(false);
  });

  it('a banned key sees the ban: nothing remaining in the headers, the ban end in the body', async () => {
    const bannedUntil = NOW + 120_000;
    const { call } = setUp(fixedUsage(usage(bannedUntil)));
    const { res, sent } = await call('GET');
    expect(headersStartingWith(res, 'x-ratelimit', 'ratelimit')).toEqual({
      'x-ratelimit-limit': '10',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(bannedUntil / 1000),
      'ratelimit-policy': '"minute";q=10;w=60, "day";q=1000;w=86400',
      ratelimit: '"minute";r=0;t=120, "day";r=0;t=120',
    });
    expect(JSON.parse((await sent()).body)).toMatchObject({ bannedUntil: new Date(bannedUntil).toISOString() });
  });

  it('a key without limits is refused 503 rather than guessed, never a 500 (issue 42)', async () => {
    const limiter = fixedUsage(usage());
    const { call } = setUp(limiter);
    const { outcome } = await call('GET', keyRecord({ id: 'key_e', plan: 'enterprise' }));
    expect(outcome).toEqual(
      new Refusal('service_unavailable', 'The plan "enterprise" of this API key is not configured on this gateway.', {
        'Retry-After': '60',
      }),
    );
    expect(limiter.usage).not.toHaveBeenCalled();
  });

  it('a store that throws answers 503 service_unavailable and writes nothing', async () => {
    const { call } = setUp(fixedUsage(new Error('store down')));
    const { outcome, res, request } = await call('GET');
    expect(outcome).toEqual(
      new Refusal('service_unavailable', 'The gateway cannot reach its store right now. Retry shortly.', {
        'Retry-After': '1',
      }),
    );
    expect(request.rateLimitOutcome).toBe('store_error');
    expect(res.headersSent).toBe(false);
  });
});
