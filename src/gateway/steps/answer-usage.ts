import type { Clock } from '../../shared/clock';
import type { ApiKeyRecord } from '../../keys/types';
import type {
  ConsumerShare,
  ConsumerWindows,
  KeyLimiter,
  KeyUsage,
  RefusingWindow,
  WindowLimits,
  WindowState,
} from '../../limits/types';
import { keyRefOf } from '../../limits/key-ref';
import { isHidden, NONE_HIDDEN, type HiddenWindows } from '../../limits/hidden-windows';
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
  /** The key's consumer (held in process), to list its windows and name it. */
  consumerOf?(record: ApiKeyRecord): { id: string; name: string; share?: ConsumerShare } | undefined;
  /** The windows this key shows in no header (src/limits/hidden-windows.ts); absent: none hidden. */
  hiddenWindowsOf?(record: ApiKeyRecord, consumer: ConsumerShare | undefined): HiddenWindows;
}

const windowOf = (name: RefusingWindow, w: WindowState) => ({
  name,
  limit: w.limit,
  remaining: w.remaining,
  reset: Math.ceil(w.resetAt / 1000),
});

/**
 * The windows as GET /v1/usage lists them: minute, day, and month when the key has one, then its
 * consumer's. Hidden windows are left out, as from every header: a hidden limit is one the operator
 * keeps from clients, and this answer is read by the same clients.
 */
function windowsOf(usage: KeyUsage, consumer: ConsumerWindows | undefined, hidden: HiddenWindows) {
  const all: Array<[RefusingWindow, WindowState | undefined]> = [
    ['minute', usage.minute],
    ['day', usage.day],
    ['month', usage.month],
    ['consumer-minute', consumer?.minute],
    ['consumer-day', consumer?.day],
    ['consumer-month', consumer?.month],
  ];
  const windows = [];
  for (const [name, w] of all) if (w !== undefined && !isHidden(hidden, name)) windows.push(windowOf(name, w));
  return windows;
}

/** The key's windows and its consumer's, read together (two commands written at once: one exchange with the store). */
async function readUsage(
  keyLimiter: KeyLimiter,
  record: ApiKeyRecord,
  limits: WindowLimits,
  share: ConsumerShare | undefined,
): Promise<[KeyUsage, ConsumerWindows | undefined]> {
  const key = keyLimiter.usage(keyRefOf(record), limits, record.billingDay);
  if (share === undefined) return [await key, undefined];
  return Promise.all([key, keyLimiter.consumerUsage(share)]);
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
    return route?.answeredByGateway === 'usage' ? answer(request, route) : CONTINUE;
  };

  async function answer(request: GatewayRequest, route: RouteMatch): Promise<StepOutcome> {
    const { method, res } = request;
    if (!route.allowedMethods.includes(method)) return methodNotAllowed(method, route);
    const record = keyOf(request);
    const limits = deps.keyLimits(record);
    if (!limits) return unconfiguredPlan(record);
    const consumer = deps.consumerOf?.(record);
    const read = await storeCall(
      request,
      'rate limit',
      () => readUsage(keyLimiter, record, limits, consumer?.share),
      describe,
    );
    if (read instanceof Refusal) return read;
    const [usage, consumerWindows] = read;
    const now = clock.now();
    const hidden = deps.hiddenWindowsOf?.(record, consumer?.share) ?? NONE_HIDDEN;
    request.rateLimitOutcome = 'allowed';
    const month = usage.month && {
      limit: usage.month.limit,
      startAt: usage.month.startAt,
      resetAt: usage.month.resetAt,
    };
    if (usage.bannedUntil !== null)
      setHeaders(res, bannedRateLimitHeaders(limits, usage.bannedUntil, now, month, hidden));
    else
      setHeaders(
        res,
        keyRateLimitHeaders(
          { minute: usage.minute, day: usage.day, now, month: usage.month, consumer: consumerWindows },
          hidden,
        ),
      );
    const body = JSON.stringify({
      plan: record.plan,
      ...(consumer ? { consumer: { id: consumer.id, name: consumer.name } } : {}),
      windows: windowsOf(usage, consumerWindows, hidden),
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
