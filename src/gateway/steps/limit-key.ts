import type { ServerResponse } from 'node:http';
import type { Logger } from '../../shared/logger';
import type { ApiKeyRecord } from '../../keys/types';
import type { PlanBook } from '../../limits/plan-limits';
import { monthSpan } from '../../limits/month-window';
import { windowsIdOfKey } from '../../limits/windows-id';
import type { ConsumeOptions, ConsumerShare, KeyDecision, KeyLimiter, RefusingWindow, WindowLimits, WindowState } from '../../limits/types';
import type { GatewayMetrics } from '../../shared/metrics';
import type { OperationCosts } from '../operations/operation-costs';
import { bannedRateLimitHeaders, keyRateLimitHeaders, type BannedMonth } from '../rate-limit-headers';
import { keyOf, type GatewayRequest } from '../request-context';
import { keyRateLimited, Refusal, temporarilyBanned, unconfiguredPlan } from '../refusals';
import { CONTINUE, setHeaders, type StepOutcome } from '../step-outcome';
import type { StoreCall } from './store-failure';

/** Share of a window after which an admitted request counts in gateway_ratelimit_near_limit_total. */
const NEAR_LIMIT_SHARE = 0.8;

/** What a shadowed plan or key asks of the limiter: refusals that lead to no ban. */
const SHADOW: ConsumeOptions = { shadow: true };

export interface KeyLimitDependencies {
  keyLimiter: KeyLimiter;
  /** The limits of a key: its own, or its plan's; null when neither exists (a plan not configured here). */
  keyLimits(record: ApiKeyRecord): WindowLimits | null;
  /** Which plans and keys are shadowed. */
  plans: PlanBook;
  metrics: GatewayMetrics;
  logger: Logger;
  storeCall: StoreCall;
  /** Config `costs`: the units each operation takes. */
  costs: OperationCosts;
  /** Retry-After of a 429: the true wait plus the configured jitter; X-RateLimit-Reset stays the true reset. */
  retryAfter(waitMs: number): string;
  /**
   * The key's consumer, when it has limits of its own (src/consumers/consumer-directory.ts: held in
   * process, no store command); its windows are decided in the same one round trip.
   */
  consumerOf?(record: ApiKeyRecord): ConsumerShare | undefined;
  /** Told each decision (usage units, webhooks: src/product/notifications.ts); returns at once. */
  onDecision?: KeyDecisionListener;
}

/** Who learns from each limiter decision of a key, with the request's cost, without holding the request. */
export type KeyDecisionListener = (record: ApiKeyRecord, decision: KeyDecision, cost: number) => void;

/** The ban and every window of a key, decided together in one store round trip, for `cost` units. */
export function createKeyLimitStep(deps: KeyLimitDependencies) {
  const { keyLimiter, plans, metrics, storeCall, costs } = deps;
  const refuseUnconfiguredPlan = unconfiguredPlanRefusal(deps.logger);

  return async function limitKey(request: GatewayRequest): Promise<StepOutcome> {
    const { res } = request;
    const record = keyOf(request);
    const limits = deps.keyLimits(record);
    if (!limits) return refuseUnconfiguredPlan(record);
    const shadow = plans.isShadowed(record);
    const route = request.route?.template;
    const options = consumeOptions(shadow, costs.costOf(request.method, route), record.billingDay, deps.consumerOf?.(record));
    const decision = await storeCall(request, 'rate limit', () => keyLimiter.consume(windowsIdOfKey(record), limits, options), (d: KeyDecision) => ({
      'asg.rate_limit.scope': 'key',
      'asg.rate_limit.decision': d.outcome,
      'asg.plan': record.plan,
    }));
    if (decision instanceof Refusal) return decision;
    deps.onDecision?.(record, decision, options?.cost ?? 1);
    if (decision.fallback) {
      request.storeFallback = decision.fallback;
      if (decision.fallback === 'open') metrics.unenforced.inc({ plan: record.plan });
    }
    if (decision.outcome === 'allowed') {
      request.rateLimitOutcome = 'allowed';
      countAdmitted(record.plan, route, options?.cost ?? 1, decision);
      setHeaders(res, keyRateLimitHeaders(decision));
      return CONTINUE;
    }
    if (shadow) return admitShadowed(res, request, { limits, decision, billingDay: record.billingDay });
    if (decision.outcome === 'banned') {
      request.rateLimitOutcome = 'banned';
      setHeaders(res, bannedRateLimitHeaders(limits, decision.bannedUntil, decision.now, bannedMonth(limits, decision.now, record.billingDay)));
      metrics.rejections.inc({ plan: record.plan, window: 'ban' });
      return temporarilyBanned(deps.retryAfter(decision.bannedUntil - decision.now));
    }
    request.rateLimitOutcome = 'limited';
    setHeaders(res, keyRateLimitHeaders(decision));
    metrics.rejections.inc({ plan: record.plan, window: decision.refusedBy });
    if (decision.bannedNow) metrics.keyBans.inc({ plan: record.plan });
    return keyRateLimited(decision.refusedBy, deps.retryAfter(decision.retryAfterMs));
  };

  /**
   * Shadow mode (CONTRACT §4): what a limit would have refused is forwarded, with the headers it
   * would have carried, no Retry-After and no ban; it is logged and counted so that an operator can
   * see what the limit would do before enforcing it.
   */
  function admitShadowed(res: ServerResponse, request: GatewayRequest, refused: ShadowRefusal): StepOutcome {
    const { limits, decision, billingDay } = refused;
    const window = decision.outcome === 'banned' ? 'ban' : decision.refusedBy;
    request.rateLimitOutcome = 'shadow_limited';
    metrics.shadowDenied.inc({ plan: request.plan, window });
    deps.logger.info({ requestId: request.requestId, plan: request.plan, keyId: request.keyId, window }, 'shadow limit would have refused; forwarded');
    if (decision.outcome === 'banned') setHeaders(res, bannedRateLimitHeaders(limits, decision.bannedUntil, decision.now, bannedMonth(limits, decision.now, billingDay)));
    else setHeaders(res, keyRateLimitHeaders(decision));
    return CONTINUE;
  }

  /** The units an admitted request took, and the windows it took past 80 %. */
  function countAdmitted(plan: string, route: string | undefined, cost: number, decision: Extract<KeyDecision, { outcome: 'allowed' }>): void {
    metrics.unitsConsumed.inc({ route: route ?? 'unmatched', plan }, cost);
    countNearLimit(plan, 'minute', decision.minute, cost);
    countNearLimit(plan, 'day', decision.day, cost);
    if (decision.month) countNearLimit(plan, 'month', decision.month, cost);
    if (decision.consumer?.minute) countNearLimit(plan, 'consumer-minute', decision.consumer.minute, cost);
    if (decision.consumer?.day) countNearLimit(plan, 'consumer-day', decision.consumer.day, cost);
    if (decision.consumer?.month) countNearLimit(plan, 'consumer-month', decision.consumer.month, cost);
  }

  /** Counts the one admitted request per window that takes a key past 80 % of it. */
  function countNearLimit(plan: string, window: RefusingWindow, windowState: WindowState, cost: number): void {
    const used = windowState.limit - windowState.remaining;
    const threshold = Math.ceil(windowState.limit * NEAR_LIMIT_SHARE);
    if (used >= threshold && used - cost < threshold) metrics.nearLimit.inc({ plan, window });
  }
}

/** What a shadowed limit would have refused: the limits applied, the decision, the key's billing day. */
interface ShadowRefusal {
  limits: WindowLimits;
  decision: Exclude<KeyDecision, { outcome: 'allowed' }>;
  billingDay?: number;
}

/**
 * A key whose plan is not configured: 503, and one log line per plan while this config is in force
 * (a handler is built for each config, this step with it), not one per request.
 */
function unconfiguredPlanRefusal(logger: Logger): (record: ApiKeyRecord) => Refusal {
  const logged = new Set<string>();
  return (record) => {
    if (!logged.has(record.plan)) {
      logged.add(record.plan);
      logger.error(
        { keyId: record.id, plan: record.plan },
        'a key uses a plan that is not configured (or has no limits) and carries no limits of its own: its requests get 503 until the plan is configured again or the key moved to another plan',
      );
    }
    return unconfiguredPlan(record);
  };
}

/** What the limiter is asked: shared constants for the common cases, so most requests allocate nothing. */
function consumeOptions(shadow: boolean, cost: number, billingDay: number | undefined, consumer: ConsumerShare | undefined): ConsumeOptions | undefined {
  if (consumer !== undefined) return { shadow, cost, billingDay, consumer };
  if (cost === 1 && billingDay === undefined) return shadow ? SHADOW : undefined;
  return { shadow, cost, billingDay };
}

/** A banned key's month, for its RateLimit-Policy: the quota over this billing month. */
function bannedMonth(limits: WindowLimits, now: number, billingDay?: number): BannedMonth | undefined {
  if (limits.perMonth === undefined) return undefined;
  const span = monthSpan(now, billingDay);
  return { limit: limits.perMonth, startAt: span.start, resetAt: span.end };
}
