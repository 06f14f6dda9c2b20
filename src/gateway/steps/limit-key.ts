import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Logger } from '../../shared/logger';
import type { ApiKeyRecord } from '../../keys/types';
import type { PlanBook } from '../../limits/plan-limits';
import { monthSpan } from '../../limits/windows/month-window';
import { keyRefOf } from '../../limits/key-ref';
import { isHidden, type HiddenWindows } from '../../limits/hidden-windows';
import type {
  ConsumeOptions,
  ConsumerShare,
  InFlightLease,
  KeyDecision,
  KeyLimiter,
  RefusingWindow,
  WindowLimits,
  WindowState,
} from '../../limits/types';
import type { GatewayMetrics } from '../../shared/metrics/metrics';
import type { OperationCosts } from '../operations/operation-costs';
import { bannedRateLimitHeaders, keyRateLimitHeaders, type KeyWindows, type BannedMonth } from '../rate-limit-headers';
import { keyOf, type GatewayRequest } from '../request-context';
import { CONCURRENCY_LIMITED, keyRateLimited, Refusal, temporarilyBanned, unconfiguredPlan } from '../refusals';
import { CONTINUE, setHeaders, type StepOutcome } from '../step-outcome';
import type { StoreCall } from './store-failure';
import { afterRequestIsOver } from '../upstream/upstream-hold';

/** Share of a window after which an admitted request counts in gateway_ratelimit_near_limit_total. */
const NEAR_LIMIT_SHARE = 0.8;

/** upstream.timeoutMs's default (10 s) + 1 s. */
const DEFAULT_LEASE_TTL_MS = 11_000;

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
  /**
   * How long a slot under maxInFlight holds when never released (an instance that died):
   * upstream.timeoutMs + 1 s, the longest a request waits for its answer's head. Default: 11 s
   * (the default timeout's).
   */
  leaseTtlMs?: number;
  /** Told each decision (usage units, webhooks: src/product/notifications.ts); returns at once. */
  onDecision?: KeyDecisionListener;
}

/** Who learns from each limiter decision of a key, with the request's cost, without holding the request. */
export type KeyDecisionListener = (record: ApiKeyRecord, decision: KeyDecision, cost: number) => void;

/** The ban and every window of a key, decided together in one store round trip, for `cost` units. */
export function createKeyLimitStep(deps: KeyLimitDependencies) {
  const { keyLimiter, plans, metrics, storeCall, costs } = deps;
  const refuseUnconfiguredPlan = unconfiguredPlanRefusal(deps.logger);
  const leaseTtlMs = deps.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS;

  return async function limitKey(request: GatewayRequest): Promise<StepOutcome> {
    const record = keyOf(request);
    const limits = deps.keyLimits(record);
    if (!limits) return refuseUnconfiguredPlan(record);
    const shadow = plans.isShadowed(record);
    const lease = leaseFor(plans.maxInFlightOf(record), leaseTtlMs);
    const consumer = deps.consumerOf?.(record);
    const hidden = plans.hiddenWindowsOf(record, consumer);
    const cost = costs.costOf(request.method, request.route?.template);
    const options = consumeOptions(shadow, cost, record.billingDay, lease, consumer);
    // A consumer's key keeps its windows, and its leases, beside the consumer's: the store finds them by both ids.
    const ref = keyRefOf(record);
    const decision = await storeCall(
      request,
      'rate limit',
      () => keyLimiter.consume(ref, limits, options),
      (d: KeyDecision) => ({
        'asg.rate_limit.scope': 'key',
        'asg.rate_limit.decision': d.outcome,
        'asg.plan': record.plan,
      }),
    );
    if (decision instanceof Refusal) return decision;
    if (decision.outcome === 'concurrency_limited')
      return refuseConcurrency(metrics, request, shadow, decision, hidden);
    deps.onDecision?.(record, decision, cost);
    noteFallback(metrics, request, record.plan, decision);
    if (decision.outcome === 'allowed') {
      // The slot is the request's until its response closes (answered, cut off, or its client gone,
      // during the decision included) and its upstream request, if any, is gone: a cancelled stream's
      // slot comes back only once the inventory no longer has its request (issue 48).
      if (lease) afterRequestIsOver(request.res, () => keyLimiter.release(ref, lease.id));
      return admit(metrics, request, cost, decision, hidden);
    }
    const refused: RefusedDecision = { limits, decision, billingDay: record.billingDay, hidden };
    if (shadow) return admitShadowed(deps, request, refused);
    return refuse(deps, request, refused);
  };
}

/** A decision taken without the shared store: said on the request, and an unenforced one counted. */
function noteFallback(metrics: GatewayMetrics, request: GatewayRequest, plan: string, decision: KeyDecision): void {
  if (!decision.fallback) return;
  request.storeFallback = decision.fallback;
  if (decision.fallback === 'open') metrics.unenforced.inc({ plan });
}

/** An admitted request: counted, and its visible windows in the headers. */
function admit(
  metrics: GatewayMetrics,
  request: GatewayRequest,
  cost: number,
  decision: Extract<KeyDecision, { outcome: 'allowed' }>,
  hidden: HiddenWindows,
): StepOutcome {
  request.rateLimitOutcome = 'allowed';
  countAdmitted(metrics, keyOf(request).plan, request.route?.template, cost, decision);
  setHeaders(request.res, keyRateLimitHeaders(decision, hidden));
  return CONTINUE;
}

/** The headers of a refused decision: a ban's (the quota as a whole) or the windows as they stand. */
function setRefusalHeaders(res: ServerResponse, refused: RefusedDecision): void {
  const { limits, decision, billingDay, hidden } = refused;
  if (decision.outcome === 'banned') {
    const month = bannedMonth(limits, decision.now, billingDay);
    setHeaders(res, bannedRateLimitHeaders(limits, decision.bannedUntil, decision.now, month, hidden));
  } else {
    setHeaders(res, keyRateLimitHeaders(decision, hidden));
  }
}

/** 429: a banned key (temporarily_banned) or a window without room (rate_limited), counted by window. */
function refuse(deps: KeyLimitDependencies, request: GatewayRequest, refused: RefusedDecision): Refusal {
  const { metrics } = deps;
  const { decision, hidden } = refused;
  const plan = keyOf(request).plan;
  setRefusalHeaders(request.res, refused);
  if (decision.outcome === 'banned') {
    request.rateLimitOutcome = 'banned';
    metrics.rejections.inc({ plan, window: 'ban' });
    return temporarilyBanned(deps.retryAfter(decision.bannedUntil - decision.now));
  }
  request.rateLimitOutcome = 'limited';
  request.refusedByWindow = decision.refusedBy;
  // The metric keeps the true window (it is the operator's); the body says `hidden` for a hidden one.
  metrics.rejections.inc({ plan, window: decision.refusedBy });
  if (decision.bannedNow) metrics.keyBans.inc({ plan });
  return keyRateLimited(
    decision.refusedBy,
    deps.retryAfter(decision.retryAfterMs),
    isHidden(hidden, decision.refusedBy),
  );
}

/**
 * Shadow mode (CONTRACT §4): what a limit would have refused is forwarded, with the headers it
 * would have carried, no Retry-After and no ban; it is logged and counted so that an operator can
 * see what the limit would do before enforcing it.
 */
function admitShadowed(deps: KeyLimitDependencies, request: GatewayRequest, refused: RefusedDecision): StepOutcome {
  const { decision } = refused;
  const window = decision.outcome === 'banned' ? 'ban' : decision.refusedBy;
  request.rateLimitOutcome = 'shadow_limited';
  deps.metrics.shadowDenied.inc({ plan: request.plan, window });
  deps.logger.info(
    { requestId: request.requestId, plan: request.plan, keyId: request.keyId, window },
    'shadow limit would have refused; forwarded',
  );
  setRefusalHeaders(request.res, refused);
  return CONTINUE;
}

/** The units an admitted request took, and the windows it took past 80 %. */
function countAdmitted(
  metrics: GatewayMetrics,
  plan: string,
  route: string | undefined,
  cost: number,
  decision: Extract<KeyDecision, { outcome: 'allowed' }>,
): void {
  metrics.unitsTally.add([route ?? 'unmatched', plan], cost);
  countNearLimit(metrics, plan, 'minute', decision.minute, cost);
  countNearLimit(metrics, plan, 'day', decision.day, cost);
  if (decision.month) countNearLimit(metrics, plan, 'month', decision.month, cost);
  if (decision.consumer?.minute) countNearLimit(metrics, plan, 'consumer-minute', decision.consumer.minute, cost);
  if (decision.consumer?.day) countNearLimit(metrics, plan, 'consumer-day', decision.consumer.day, cost);
  if (decision.consumer?.month) countNearLimit(metrics, plan, 'consumer-month', decision.consumer.month, cost);
}

/** Counts the one admitted request per window that takes a key past 80 % of it. */
function countNearLimit(
  metrics: GatewayMetrics,
  plan: string,
  window: RefusingWindow,
  windowState: WindowState,
  cost: number,
): void {
  const used = windowState.limit - windowState.remaining;
  const threshold = Math.ceil(windowState.limit * NEAR_LIMIT_SHARE);
  if (used >= threshold && used - cost < threshold) metrics.nearLimit.inc({ plan, window });
}

/** A refused decision (or one a shadowed limit would have refused): the limits applied, the decision, the key's billing day. */
interface RefusedDecision {
  limits: WindowLimits;
  decision: Exclude<KeyDecision, { outcome: 'allowed' | 'concurrency_limited' }>;
  billingDay?: number;
  /** The windows its headers leave out. */
  hidden: HiddenWindows;
}

/**
 * 429 concurrency_limited, Retry-After 1: nothing was consumed and no ban counted (the limiter
 * refused before any window). A shadowed key or plan is forwarded instead, without a slot.
 */
function refuseConcurrency(
  metrics: GatewayMetrics,
  request: GatewayRequest,
  shadow: boolean,
  windows: KeyWindows,
  hidden: HiddenWindows,
): StepOutcome {
  // The windows as they stand: every /v1 answer carries them (the visible ones).
  setHeaders(request.res, keyRateLimitHeaders(windows, hidden));
  if (shadow) {
    request.rateLimitOutcome = 'shadow_limited';
    metrics.shadowDenied.inc({ plan: request.plan, window: 'concurrency' });
    return CONTINUE;
  }
  request.rateLimitOutcome = 'concurrency_limited';
  metrics.inFlightRejections.inc({ plan: request.plan });
  return CONCURRENCY_LIMITED;
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
function consumeOptions(
  shadow: boolean,
  cost: number,
  billingDay: number | undefined,
  inFlight: InFlightLease | undefined,
  consumer: ConsumerShare | undefined,
): ConsumeOptions | undefined {
  if (consumer !== undefined) return { shadow, cost, billingDay, inFlight, consumer };
  if (cost === 1 && billingDay === undefined && inFlight === undefined) return shadow ? SHADOW : undefined;
  return { shadow, cost, billingDay, inFlight };
}

/** A slot for this request under the key's maxInFlight, or none when it has no such limit. */
function leaseFor(maxInFlight: number | undefined, ttlMs: number): InFlightLease | undefined {
  return maxInFlight === undefined ? undefined : { max: maxInFlight, id: randomUUID(), ttlMs };
}

/** A banned key's month, for its RateLimit-Policy: the quota over this billing month. */
function bannedMonth(limits: WindowLimits, now: number, billingDay?: number): BannedMonth | undefined {
  if (limits.perMonth === undefined) return undefined;
  const span = monthSpan(now, billingDay);
  return { limit: limits.perMonth, startAt: span.start, resetAt: span.end };
}
