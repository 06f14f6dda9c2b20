import type { Clock } from '../../shared/clock';
import type { ApiKeyRecord } from '../../keys/types';
import type { KeyLimiter, KeyUsage, WindowLimits, WindowName, WindowState } from '../../limits/types';
import { bannedRateLimitHeaders, keyRateLimitHeaders } from '../rate-limit-headers';
import type { RouteMatch } from '../operations/routes';
import { keyOf, type GatewayRequest } from '../request-context';
import { methodNotAllowed, Refusal, unconfiguredPlan } from '../refusals';
import { ANSWERED, CONTINUE, setHeaders, type StepOutcome } from '../step-outcome';
import type { StoreCall } from './store-failure';

export interface UsageDependencies {
  keyLimiter: KeyLimiter;
  /** The limits of a key: its own, or its plan's; null when neither exists (a plan not configured here). */
  keyLimits(record: ApiKeyRecord): WindowLimits | null;
  clock: Clock;
  storeCall: StoreCall;
}

const windowOf = (name: WindowName, w: WindowState) => ({ name, limit: w.limit, remaining: w.remaining, reset: Math.ceil(w.resetAt / 1000) });

/** The windows as GET /v1/usage lists them: minute, day, and month when the key has one. */
function windowsOf(usage: KeyUsage) {
  const windows = [windowOf('minute', usage.minute), windowOf('day', usage.day)];
  if (usage.month) windows.push(windowOf('month', usage.month));
  return windows;
}

/**
 * GET /v1/usage (CONTRACT §3): the caller's plan, every window, ban and expiry, read without
 * consuming a unit (as GitHub's GET /rate_limit). Other methods get 405, also for free. Every other
 * route goes on to the key's limit.
 */
export function createUsageStep(deps: UsageDependencies) {
  const { keyLimiter, clock, storeCall } = deps;
  const describe = () => ({ 'asg.rate_limit.scope': 'key', 'asg.rate_limit.decision': 'peek' });

  return function answerUsage(request: GatewayRequest): StepOutcome | Promise<StepOutcome> {
    const route = request.route;
    return route?.answeredByGateway ? answer(request, route) : CONTINUE;
  };

  async function answer(request: GatewayRequest, route: RouteMatch): Promise<StepOutcome> {
    const { method, res } = request;
    if (!route.allowedMethods.includes(method)) return methodNotAllowed(method, route);
    const record = keyOf(request);
    const limits = deps.keyLimits(record);
    if (!limits) return unconfiguredPlan(record);
    const usage = await storeCall<KeyUsage>(request, 'rate limit', () => keyLimiter.usage(record.id, limits, record.billingDay), describe);
    if (usage instanceof Refusal) return usage;
    const now = clock.now();
    request.rateLimitOutcome = 'allowed';
    if (usage.bannedUntil !== null) setHeaders(res, bannedRateLimitHeaders(limits, usage.bannedUntil, now, usage.month && { limit: usage.month.limit, startAt: usage.month.startAt, resetAt: usage.month.resetAt }));
    else setHeaders(res, keyRateLimitHeaders({ minute: usage.minute, day: usage.day, now, month: usage.month }));
    const body = JSON.stringify({
      plan: record.plan,
      windows: windowsOf(usage),
      bannedUntil: usage.bannedUntil === null ? null : new Date(usage.bannedUntil).toISOString(),
      expiresAt: record.expiresAt,
    });
    res.statusCode = 200;
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('Content-Length', Buffer.byteLength(body));
    res.setHeader('Cache-Control', 'no-store');
    res.end(method === 'HEAD' ? undefined : body);
    return ANSWERED;
  }
}
