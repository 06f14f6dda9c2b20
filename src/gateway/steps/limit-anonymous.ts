import type { ServerResponse } from 'node:http';
import type { Clock } from '../../shared/clock';
import type { AddressDecision, AddressLimiter, WindowState } from '../../limits/types';
import type { GatewayMetrics } from '../../shared/metrics';
import { anonymousRateLimitHeaders } from '../rate-limit-headers';
import type { RequestContext } from '../request-context';
import { Refusal, setHeaders, type StepOutcome } from '../step-outcome';
import type { Caller } from './authenticate';
import type { StoreCall } from './store-failure';

export interface AnonymousLimitDependencies {
  addressLimiter: AddressLimiter;
  metrics: GatewayMetrics;
  clock: Clock;
  storeCall: StoreCall;
  /** Retry-After of a 429: the true wait plus the configured jitter. */
  retryAfter(waitMs: number): string;
}

/**
 * A caller without a usable key is limited per client address (CONTRACT §4), and answered with
 * that window's headers. An unknown key spends a unit of it and may get 429; a known key that may
 * no longer be used (revoked, expired) only shows the window and always gets its own 401.
 */
export function createAnonymousLimitStep(deps: AnonymousLimitDependencies) {
  const { addressLimiter, metrics, clock, storeCall } = deps;
  const describeDecision = (decision: AddressDecision) => ({ 'asg.rate_limit.scope': 'address', 'asg.rate_limit.decision': decision.allowed ? 'allowed' : 'limited' });
  const describeWindow = () => ({ 'asg.rate_limit.scope': 'address', 'asg.rate_limit.decision': 'peek' });

  return async function limitAnonymous(res: ServerResponse, request: RequestContext, caller: Exclude<Caller, { kind: 'key' }>): Promise<StepOutcome> {
    request.rateLimitOutcome = 'anonymous';
    if (caller.kind === 'known') {
      const window = await storeCall<WindowState>(request, 'rate limit', () => addressLimiter.peek(request.clientAddress), describeWindow);
      if (window instanceof Refusal) return window;
      setHeaders(res, anonymousRateLimitHeaders(window, clock.now()));
      return caller.refusal;
    }
    const neverIssuedKey = caller.neverIssued === true;
    const decision = await storeCall(request, 'rate limit', () => addressLimiter.consume(request.clientAddress, { neverIssuedKey }), describeDecision);
    if (decision instanceof Refusal) return decision;
    if (decision.fallback) request.storeFallback = decision.fallback;
    setHeaders(res, anonymousRateLimitHeaders(decision.window, clock.now()));
    if (decision.allowed) return caller.refusal;
    request.rateLimitOutcome = 'anonymous_limited';
    metrics.rejections.inc({ plan: 'anonymous', window: 'anonymous' });
    return new Refusal('rate_limited', 'Too many requests without a valid API key from this address.', { 'Retry-After': deps.retryAfter(decision.retryAfterMs) });
  };
}
