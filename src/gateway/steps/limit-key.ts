import type { ServerResponse } from 'node:http';
import type { Logger } from '../../shared/logger';
import type { ApiKeyRecord } from '../../keys/types';
import type { PlanBook } from '../../limits/plan-limits';
import type { ConsumeOptions, KeyDecision, KeyLimiter, WindowLimits, WindowState } from '../../limits/types';
import type { GatewayMetrics } from '../metrics';
import { bannedRateLimitHeaders, keyRateLimitHeaders } from '../rate-limit-headers';
import type { RequestContext } from '../request-context';
import { CONTINUE, Refusal, setHeaders, type StepOutcome } from '../step-outcome';
import type { StoreCall } from './store-failure';

/** Share of a window after which an admitted request counts in gateway_ratelimit_near_limit_total. */
const NEAR_LIMIT_SHARE = 0.8;

/** What a shadowed plan or key asks of the limiter: refusals that lead to no ban. */
const SHADOW: ConsumeOptions = { shadow: true };

const BANNED_MESSAGE = 'This API key is temporarily banned for retrying after 429 responses. Use exponential backoff.';

export interface KeyLimitDependencies {
  keyLimiter: KeyLimiter;
  plans: PlanBook;
  metrics: GatewayMetrics;
  logger: Logger;
  storeCall: StoreCall;
  /** Retry-After of a 429: the true wait plus the configured jitter; X-RateLimit-Reset stays the true reset. */
  retryAfter(waitMs: number): string;
}

/** A key with neither limits of its own nor a plan that has some: refused rather than guessed. */
export function limitsNotFound(record: ApiKeyRecord): Error {
  return new Error(`key ${record.id} has plan ${record.plan} without limits`);
}

/** The ban and both windows of a key, decided together in one store round trip. */
export function createKeyLimitStep(deps: KeyLimitDependencies) {
  const { keyLimiter, plans, metrics, storeCall } = deps;

  return async function limitKey(res: ServerResponse, request: RequestContext, record: ApiKeyRecord): Promise<StepOutcome> {
    const limits = plans.limitsOf(record);
    if (!limits) throw limitsNotFound(record);
    const shadow = plans.isShadowed(record);
    const decision = await storeCall(request, 'rate limit', () => keyLimiter.consume(record.id, limits, shadow ? SHADOW : undefined), (d: KeyDecision) => ({
      'asg.rate_limit.scope': 'key',
      'asg.rate_limit.decision': d.outcome,
      'asg.plan': record.plan,
    }));
    if (decision instanceof Refusal) return decision;
    if (decision.fallback) {
      request.storeFallback = decision.fallback;
      if (decision.fallback === 'open') metrics.unenforced.inc({ plan: record.plan });
    }
    if (decision.outcome === 'allowed') {
      request.rateLimitOutcome = 'allowed';
      countNearLimit(record.plan, 'minute', decision.minute);
      countNearLimit(record.plan, 'day', decision.day);
      setHeaders(res, keyRateLimitHeaders(decision.minute, decision.day, decision.now));
      return CONTINUE;
    }
    if (shadow) return admitShadowed(res, request, limits, decision);
    if (decision.outcome === 'banned') {
      request.rateLimitOutcome = 'banned';
      setHeaders(res, bannedRateLimitHeaders(limits, decision.bannedUntil, decision.now));
      metrics.rejections.inc({ plan: record.plan, window: 'ban' });
      return new Refusal('temporarily_banned', BANNED_MESSAGE, { 'Retry-After': deps.retryAfter(decision.bannedUntil - decision.now) });
    }
    request.rateLimitOutcome = 'limited';
    setHeaders(res, keyRateLimitHeaders(decision.minute, decision.day, decision.now, decision.refusedBy));
    metrics.rejections.inc({ plan: record.plan, window: decision.refusedBy });
    if (decision.bannedNow) metrics.keyBans.inc({ plan: record.plan });
    return new Refusal('rate_limited', `The ${decision.refusedBy} limit of this API key is used up.`, { 'Retry-After': deps.retryAfter(decision.retryAfterMs) });
  };

  /**
   * Shadow mode (CONTRACT §4): what a limit would have refused is forwarded, with the headers it
   * would have carried, no Retry-After and no ban; it is logged and counted so that an operator can
   * see what the limit would do before enforcing it.
   */
  function admitShadowed(res: ServerResponse, request: RequestContext, limits: WindowLimits, decision: Exclude<KeyDecision, { outcome: 'allowed' }>): StepOutcome {
    const window = decision.outcome === 'banned' ? 'ban' : decision.refusedBy;
    request.rateLimitOutcome = 'shadow_limited';
    metrics.shadowDenied.inc({ plan: request.plan, window });
    deps.logger.info({ requestId: request.requestId, plan: request.plan, keyId: request.keyId, window }, 'shadow limit would have refused; forwarded');
    if (decision.outcome === 'banned') setHeaders(res, bannedRateLimitHeaders(limits, decision.bannedUntil, decision.now));
    else setHeaders(res, keyRateLimitHeaders(decision.minute, decision.day, decision.now, decision.refusedBy));
    return CONTINUE;
  }

  /** Counts the one admitted request per window that takes a key past 80 % of it. */
  function countNearLimit(plan: string, window: 'minute' | 'day', windowState: WindowState): void {
    if (windowState.limit - windowState.remaining === Math.ceil(windowState.limit * NEAR_LIMIT_SHARE)) metrics.nearLimit.inc({ plan, window });
  }
}
