import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from '../../shared/clock';
import type { ApiKeyRecord } from '../../keys/types';
import type { PlanBook } from '../../limits/plan-limits';
import type { KeyLimiter, KeyUsage, WindowName, WindowState } from '../../limits/types';
import { bannedRateLimitHeaders, keyRateLimitHeaders } from '../rate-limit-headers';
import type { RequestContext } from '../request-context';
import type { RouteMatch } from '../operations/routes';
import { ANSWERED, Refusal, setHeaders, type StepOutcome } from '../step-outcome';
import { methodNotAllowed } from './check-route';
import { unconfiguredPlan } from './limit-key';
import type { StoreCall } from './store-failure';

export interface UsageDependencies {
  keyLimiter: KeyLimiter;
  plans: PlanBook;
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
 * GET /v1/usage (CONTRACT §3): the caller's plan, both windows, ban and expiry, read without
 * consuming a unit (as GitHub's GET /rate_limit). Other methods get 405, also for free.
 */
export function createUsageStep(deps: UsageDependencies) {
  const { keyLimiter, plans, clock, storeCall } = deps;
  const describe = () => ({ 'asg.rate_limit.scope': 'key', 'asg.rate_limit.decision': 'peek' });

  return async function answerUsage(req: IncomingMessage, res: ServerResponse, request: RequestContext, route: RouteMatch, record: ApiKeyRecord): Promise<StepOutcome> {
    const method = req.method!;
    if (!route.allowedMethods.includes(method)) return methodNotAllowed(method, route);
    const limits = plans.limitsOf(record);
    if (!limits) return unconfiguredPlan(record);
    const usage = await storeCall<KeyUsage>(request, 'rate limit', () => keyLimiter.usage(record.id, limits, record.billingDay), describe);
    if (usage instanceof Refusal) return usage;
    const now = clock.now();
    request.rateLimitOutcome = 'allowed';
    if (usage.bannedUntil !== null) setHeaders(res, bannedRateLimitHeaders(limits, usage.bannedUntil, now, usage.month && { limit: usage.month.limit, startAt: usage.month.startAt, resetAt: usage.month.resetAt }));
    else setHeaders(res, keyRateLimitHeaders(usage.minute, usage.day, now, undefined, usage.month));
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
  };
}
