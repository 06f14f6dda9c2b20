import { matchRoute } from '../../../src/gateway/operations/routes';
import {
  bodyTooLarge,
  keyRateLimited,
  methodNotAllowed,
  Refusal,
  temporarilyBanned,
  unconfiguredPlan,
  upstreamRefusal,
} from '../../../src/gateway/refusals';

describe('refusals', () => {
  it('methodNotAllowed names the method and lists what the route answers', () => {
    const route = matchRoute('/v1/usage')!;
    expect(methodNotAllowed('PATCH', route)).toEqual(
      new Refusal('method_not_allowed', 'PATCH is not allowed here.', { Allow: 'GET, HEAD' }),
    );
  });

  it('a key over a window names the window that refused, with the Retry-After given', () => {
    expect(keyRateLimited('day', '61')).toEqual(
      new Refusal('rate_limited', 'The day limit of this API key is used up.', { 'Retry-After': '61' }, undefined, {
        window: 'day',
      }),
    );
    expect(temporarilyBanned('300')).toEqual(
      new Refusal(
        'temporarily_banned',
        'This API key is temporarily banned for retrying after 429 responses. Use exponential backoff.',
        { 'Retry-After': '300' },
      ),
    );
  });

  it('a key whose plan is not configured gets 503 with a Retry-After, naming the plan (issue 42)', () => {
    expect(unconfiguredPlan({ plan: 'gold' })).toEqual(
      new Refusal('service_unavailable', 'The plan "gold" of this API key is not configured on this gateway.', {
        'Retry-After': '60',
      }),
    );
  });

  it('a body too large names the limit', () => {
    expect(bodyTooLarge(16_384)).toEqual(
      new Refusal('payload_too_large', 'The request body is larger than 16384 bytes.'),
    );
  });

  it('an upstream failure keeps its code, message, headers and status (503 for the guard, the code’s own otherwise)', () => {
    const overloaded = {
      code: 'upstream_unavailable',
      reason: 'overloaded',
      message: 'busy',
      status: 503,
      headers: { 'Retry-After': '1' },
    } as const;
    expect(upstreamRefusal(overloaded)).toEqual(
      new Refusal('upstream_unavailable', 'busy', { 'Retry-After': '1' }, 503),
    );
    const timedOut = upstreamRefusal({ code: 'upstream_timeout', reason: 'timeout', message: 'slow' });
    expect(timedOut).toEqual(new Refusal('upstream_timeout', 'slow', undefined, undefined));
    expect(timedOut.status).toBeUndefined();
  });
});
