import type { Clock } from '../../shared/clock';
import { addressGroup } from '../../shared/http/ip-address';
import type { AddressDecision, AddressLimiter, WindowState } from '../../limits/types';
import type { GatewayMetrics } from '../../shared/metrics/metrics';
import { anonymousRateLimitHeaders } from '../rate-limit-headers';
import type { GatewayRequest, KeylessCaller } from '../request-context';
import { anonymousRateLimited, Refusal } from '../refusals';
import { CONTINUE, setHeaders, type StepOutcome } from '../step-outcome';
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
 * that window's headers and its 401 (or 429). An unknown key spends a unit of it and may get 429; a
 * known key that may no longer be used (revoked, expired) only shows the window and always gets its
 * own 401. A caller with a usable key goes on to its key's limit. The window is its address's
 * group (addressGroup): an IPv6 client's /64, as the admin lockout counts it, so that one host
 * cannot rotate through its /64 for fresh windows; a zone id or an IPv4 mapping makes no window
 * of its own.
 */
export function createAnonymousLimitStep(deps: AnonymousLimitDependencies) {
  const { addressLimiter, metrics, clock, storeCall } = deps;
  const describeDecision = (decision: AddressDecision) => ({
    'asg.rate_limit.scope': 'address',
    'asg.rate_limit.decision': decision.allowed ? 'allowed' : 'limited',
  });
  const describeWindow = () => ({ 'asg.rate_limit.scope': 'address', 'asg.rate_limit.decision': 'peek' });

  return function limitAnonymous(request: GatewayRequest): StepOutcome | Promise<StepOutcome> {
    const caller = request.keyless;
    return caller === null ? CONTINUE : limitAddress(request, caller);
  };

  async function limitAddress(request: GatewayRequest, caller: KeylessCaller): Promise<StepOutcome> {
    request.rateLimitOutcome = 'anonymous';
    if (caller.known) {
      const window = await storeCall<WindowState>(
        request,
        'rate limit',
        () => addressLimiter.peek(addressGroup(request.clientAddress)),
        describeWindow,
      );
      if (window instanceof Refusal) return window;
      setHeaders(request.res, anonymousRateLimitHeaders(window, clock.now()));
      return caller.refusal;
    }
    const neverIssuedKey = caller.neverIssued;
    const decision = await storeCall(
      request,
      'rate limit',
      () => addressLimiter.consume(addressGroup(request.clientAddress), { neverIssuedKey }),
      describeDecision,
    );
    if (decision instanceof Refusal) return decision;
    if (decision.fallback) request.storeFallback = decision.fallback;
    setHeaders(request.res, anonymousRateLimitHeaders(decision.window, clock.now()));
    if (decision.allowed) return caller.refusal;
    request.rateLimitOutcome = 'anonymous_limited';
    metrics.rejections.inc({ plan: 'anonymous', window: 'anonymous' });
    return anonymousRateLimited(deps.retryAfter(decision.retryAfterMs));
  }
}
