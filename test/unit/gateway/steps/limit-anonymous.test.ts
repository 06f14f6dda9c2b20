import { ManualClock } from '../../../../src/shared/clock';
import { createMemoryAddressLimiter } from '../../../../src/limits';
import type { AddressDecision, AddressLimiter, WindowState } from '../../../../src/limits/types';
import { createAnonymousLimitStep } from '../../../../src/gateway/steps/limit-anonymous';
import type { GatewayRequest, KeylessCaller } from '../../../../src/gateway/request-context';
import { Refusal } from '../../../../src/gateway/refusals';
import { CONTINUE } from '../../../../src/gateway/step-outcome';
import {
  NOW,
  counted,
  countedInAll,
  gatewayRequest,
  headersStartingWith,
  keyRecord,
  stepEnvironment,
} from './step-kit';

const unknownCaller: KeylessCaller = {
  refusal: new Refusal('invalid_api_key', 'The API key is not valid for this environment.', {
    'WWW-Authenticate': 'Bearer realm="animal-store"',
  }),
  known: false,
  neverIssued: false,
};
const revokedCaller: KeylessCaller = {
  refusal: new Refusal('revoked_api_key', 'This API key has been revoked.', {
    'WWW-Authenticate': 'Bearer realm="animal-store"',
  }),
  known: true,
  neverIssued: false,
};

/** A request authenticate found without a usable key. */
const keylessRequest = (caller: KeylessCaller): GatewayRequest => gatewayRequest(undefined, { keyless: caller });

const STORE_UNAVAILABLE = new Refusal(
  'service_unavailable',
  'The gateway cannot reach its store right now. Retry shortly.',
  { 'Retry-After': '1' },
);

function setUp(addressLimiter: AddressLimiter) {
  const env = stepEnvironment();
  const clock = new ManualClock(NOW);
  const retryAfter = jest.fn((waitMs: number) => `${Math.ceil(waitMs / 1000)}+jitter`);
  const limitAnonymous = createAnonymousLimitStep({
    addressLimiter,
    metrics: env.metrics,
    clock,
    storeCall: env.storeCall,
    retryAfter,
  });
  return { ...env, clock, retryAfter, limitAnonymous };
}

/** An address limiter that answers fixed decisions, and counts what it was asked. */
function fixedAddressLimiter(
  decision: AddressDecision | Error,
  window: WindowState | Error = decision instanceof Error ? decision : decision.window,
) {
  return {
    consume: jest.fn(async () => {
      if (decision instanceof Error) throw decision;
      return decision;
    }),
    peek: jest.fn(async () => {
      if (window instanceof Error) throw window;
      return window;
    }),
  };
}

const window = (remaining: number): WindowState => ({ limit: 30, remaining, resetAt: NOW + 42_500 });

describe('anonymous limit step', () => {
  it('a caller with a usable key goes on to its key limit without asking the address limiter', async () => {
    const limiter = fixedAddressLimiter({ allowed: true, window: window(29), retryAfterMs: 0 });
    const { limitAnonymous } = setUp(limiter);
    const request = gatewayRequest(undefined, { key: keyRecord() });
    expect(await limitAnonymous(request)).toBe(CONTINUE);
    expect(limiter.consume).not.toHaveBeenCalled();
    expect(limiter.peek).not.toHaveBeenCalled();
    expect(request.rateLimitOutcome).toBeNull();
  });

  it('a key proven never issued asks the address limiter for a batched unit (neverIssuedKey), so it costs the store nothing per request', async () => {
    const limiter = fixedAddressLimiter({ allowed: true, window: window(29), retryAfterMs: 0 });
    const { limitAnonymous } = setUp(limiter);
    expect(await limitAnonymous(keylessRequest({ ...unknownCaller, neverIssued: true }))).toBe(unknownCaller.refusal);
    expect(limiter.consume).toHaveBeenCalledWith('203.0.113.7', { neverIssuedKey: true });
  });

  it('an unknown key under the limit spends a unit and gets its own 401 with the address window in the headers', async () => {
    const limiter = fixedAddressLimiter({ allowed: true, window: window(29), retryAfterMs: 0 });
    const { limitAnonymous, metrics } = setUp(limiter);
    const request = keylessRequest(unknownCaller);
    const res = request.res;
    const outcome = await limitAnonymous(request);
    expect(outcome).toBe(unknownCaller.refusal);
    expect(limiter.consume).toHaveBeenCalledWith('203.0.113.7', { neverIssuedKey: false });
    expect(limiter.peek).not.toHaveBeenCalled();
    expect(headersStartingWith(res, 'x-ratelimit', 'ratelimit')).toEqual({
      'x-ratelimit-limit': '30',
      'x-ratelimit-remaining': '29',
      'x-ratelimit-reset': String(Math.ceil((NOW + 42_500) / 1000)),
      'ratelimit-policy': '"anonymous";q=30;w=60',
      ratelimit: '"anonymous";r=29;t=43',
    });
    expect(request).toMatchObject({ rateLimitOutcome: 'anonymous', storeFallback: null });
    expect(await countedInAll(metrics.rejections)).toBe(0);
  });

  it('an unknown key over the limit gets 429 rate_limited with a jittered Retry-After, counted under anonymous', async () => {
    const limiter = fixedAddressLimiter({ allowed: false, window: window(0), retryAfterMs: 12_300 });
    const { limitAnonymous, metrics, retryAfter } = setUp(limiter);
    const request = keylessRequest(unknownCaller);
    const res = request.res;
    const outcome = await limitAnonymous(request);
    expect(outcome).toEqual(
      new Refusal(
        'rate_limited',
        'Too many requests without a valid API key from this address.',
        { 'Retry-After': '13+jitter' },
        undefined,
        { window: 'anonymous' },
      ),
    );
    expect(retryAfter).toHaveBeenCalledWith(12_300);
    expect(res.getHeader('x-ratelimit-remaining')).toBe('0');
    expect(res.getHeader('retry-after')).toBeUndefined();
    expect(request.rateLimitOutcome).toBe('anonymous_limited');
    expect(await counted(metrics.rejections, { plan: 'anonymous', window: 'anonymous' })).toBe(1);
  });

  it('a decision taken without the shared store is written into the request', async () => {
    const limiter = fixedAddressLimiter({ allowed: true, window: window(10), retryAfterMs: 0, fallback: 'local' });
    const { limitAnonymous } = setUp(limiter);
    const request = keylessRequest(unknownCaller);
    await limitAnonymous(request);
    expect(request.storeFallback).toBe('local');
  });

  it('a known revoked key only peeks at the window: it never spends a unit and always gets its own 401', async () => {
    const limiter = fixedAddressLimiter({ allowed: false, window: window(0), retryAfterMs: 9_000 });
    const { limitAnonymous, metrics } = setUp(limiter);
    const request = keylessRequest(revokedCaller);
    const res = request.res;
    const outcome = await limitAnonymous(request);
    expect(outcome).toBe(revokedCaller.refusal);
    expect(limiter.consume).not.toHaveBeenCalled();
    expect(limiter.peek).toHaveBeenCalledWith('203.0.113.7');
    expect(res.getHeader('x-ratelimit-remaining')).toBe('0');
    expect(request.rateLimitOutcome).toBe('anonymous');
    expect(await countedInAll(metrics.rejections)).toBe(0);
  });

  it('with the in-process limiter: unknown keys spend the address window down to 429, a revoked key leaves it as it is', async () => {
    const clock = new ManualClock(NOW);
    const limiter = createMemoryAddressLimiter({ perMinute: 2, clock });
    const { limitAnonymous, metrics } = setUp(limiter);
    const call = async (caller: KeylessCaller) => {
      const request = keylessRequest(caller);
      const outcome = await limitAnonymous(request);
      return { outcome, remaining: request.res.getHeader('x-ratelimit-remaining') };
    };

    expect(await call(unknownCaller)).toEqual({ outcome: unknownCaller.refusal, remaining: '1' });
    for (let i = 0; i < 3; i++)
      expect(await call(revokedCaller)).toEqual({ outcome: revokedCaller.refusal, remaining: '1' });
    expect(await call(unknownCaller)).toEqual({ outcome: unknownCaller.refusal, remaining: '0' });
    const over = await call(unknownCaller);
    expect(over.outcome).toMatchObject({ code: 'rate_limited' });
    expect(over.remaining).toBe('0');
    expect(await counted(metrics.rejections, { plan: 'anonymous', window: 'anonymous' })).toBe(1);
  });

  /** Issue 48 (item 13): the window is the address's group, as the admin lockout counts it. */
  it('an IPv6 client is counted by its /64, a zone id or an IPv4 mapping makes no window of its own', async () => {
    const clock = new ManualClock(NOW);
    const limiter = createMemoryAddressLimiter({ perMinute: 3, clock });
    const { limitAnonymous } = setUp(limiter);
    const remainingFor = async (clientAddress: string) => {
      const request = gatewayRequest(undefined, { keyless: unknownCaller, clientAddress });
      await limitAnonymous(request);
      return request.res.getHeader('x-ratelimit-remaining');
    };

    // Two addresses of one /64 (one host rotating its interface identifier) share one window.
    expect(await remainingFor('2001:db8:0:1::1')).toBe('2');
    expect(await remainingFor('2001:db8:0:1:aaaa:bbbb:cccc:dddd')).toBe('1');
    // The next /64 is another subscriber.
    expect(await remainingFor('2001:db8:0:2::1')).toBe('2');
    // A link-local address with its zone id and without are one client.
    expect(await remainingFor('fe80::1%eth0')).toBe('2');
    expect(await remainingFor('fe80::1')).toBe('1');
    // An IPv4-mapped IPv6 client is its IPv4 address; IPv4 addresses stay one each.
    expect(await remainingFor('::ffff:198.51.100.4')).toBe('2');
    expect(await remainingFor('198.51.100.4')).toBe('1');
    expect(await remainingFor('198.51.100.5')).toBe('2');
  });

  it.each([
    ['an unknown key', unknownCaller, 'consume'],
    ['a known key', revokedCaller, 'peek'],
  ] as const)('%s with an unreachable store gets 503 and no rate-limit headers', async (_name, caller, method) => {
    const limiter = fixedAddressLimiter(new Error('store down'));
    const { limitAnonymous, metrics } = setUp(limiter);
    const request = keylessRequest(caller);
    const res = request.res;
    const outcome = await limitAnonymous(request);
    expect(outcome).toEqual(STORE_UNAVAILABLE);
    expect(limiter[method]).toHaveBeenCalledTimes(1);
    expect(request.rateLimitOutcome).toBe('store_error');
    expect(headersStartingWith(res, 'x-ratelimit', 'ratelimit')).toEqual({});
    expect(await counted(metrics.storeErrors)).toBe(1);
  });
});
