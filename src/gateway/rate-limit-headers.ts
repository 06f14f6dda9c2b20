import { retryAfterSeconds } from '../shared/retry-after';
import type {
  ConsumerWindows,
  MonthWindowState,
  RefusingWindow,
  WindowLimits,
  WindowName,
  WindowState,
} from '../limits/types';
import { isHidden, NONE_HIDDEN, type HiddenWindows } from '../limits/hidden-windows';

const WINDOW_SECONDS = { minute: 60, day: 86_400 } as const;

function secondsUntil(resetAt: number, now: number): number {
  return Math.max(0, Math.ceil((resetAt - now) / 1000));
}

/**
 * The window a client should watch: the one with fewest remaining (minute, then day, then month on
 * a tie); or, on a refusal, the window that refused, so that X-RateLimit-Reset is when the key is
 * served again.
 */
export function bindingWindow(
  minute: WindowState,
  day: WindowState,
  refusedBy?: WindowName,
  month?: WindowState,
): WindowName {
  if (refusedBy) return refusedBy;
  let binding: WindowName = day.remaining < minute.remaining ? 'day' : 'minute';
  if (month !== undefined && month.remaining < Math.min(minute.remaining, day.remaining)) binding = 'month';
  return binding;
}

/** Distinct (per-minute, per-day) pairs are few (the plans, and keys with limits of their own). */
const MAX_CACHED_POLICIES = 10_000;
const policies = new Map<number, Map<number, string>>();
let cachedPolicies = 0;

/** RateLimit-Policy depends on the limits alone: written once per pair of limits, not per request. */
function keyPolicy(perMinute: number, perDay: number): string {
  let byDay = policies.get(perMinute);
  let policy = byDay?.get(perDay);
  if (policy !== undefined) return policy;
  if (cachedPolicies >= MAX_CACHED_POLICIES) {
    policies.clear();
    cachedPolicies = 0;
    byDay = undefined;
  }
  policy = `"minute";q=${perMinute};w=${WINDOW_SECONDS.minute}, "day";q=${perDay};w=${WINDOW_SECONDS.day}`;
  if (!byDay) policies.set(perMinute, (byDay = new Map()));
  byDay.set(perDay, policy);
  cachedPolicies++;
  return policy;
}

/** The month's policy item: its quota (credits included) over the seconds of this billing month, which vary from 28 to 31 days. */
export function monthPolicy(limit: number, startAt: number, resetAt: number): string {
  return `"month";q=${limit};w=${Math.round((resetAt - startAt) / 1000)}`;
}

/** A key's windows at `now`, as a decision or a usage carries them; `refusedBy` only on a refusal. */
export interface KeyWindows {
  minute: WindowState;
  day: WindowState;
  now: number;
  refusedBy?: RefusingWindow;
  /** Only when the key has a month window. */
  month?: MonthWindowState;
  /** The windows its consumer has limits for (CONTRACT §4), when it has a consumer with limits. */
  consumer?: ConsumerWindows;
}

/**
 * Header values for a key's windows (CONTRACT §4). A KeyDecision that is not a ban is its own
 * argument. The consumer's windows appear as `"consumer-minute"`, `"consumer-day"`,
 * `"consumer-month"` and count for X-RateLimit-* like the key's own. Hidden windows
 * (src/limits/hidden-windows.ts) are named and counted in none of them.
 */
export function keyRateLimitHeaders(windows: KeyWindows, hidden: HiddenWindows = NONE_HIDDEN): Record<string, string> {
  return hidden === NONE_HIDDEN ? allWindowsHeaders(windows) : visibleWindowsHeaders(windows, hidden);
}

/** Every window shown: the common case, its RateLimit-Policy cached per pair of limits. */
function allWindowsHeaders({ minute, day, now, refusedBy, month, consumer }: KeyWindows): Record<string, string> {
  const own =
    refusedBy === undefined || !refusedBy.startsWith('consumer-') ? (refusedBy as WindowName | undefined) : undefined;
  const binding = bindingWindow(minute, day, own, month);
  let shown = binding === 'minute' ? minute : binding === 'day' ? day : month!;
  if (consumer !== undefined) shown = consumerBinding(shown, consumer, refusedBy);
  const headers = {
    'X-RateLimit-Limit': String(shown.limit),
    'X-RateLimit-Remaining': String(shown.remaining),
    'X-RateLimit-Reset': String(Math.ceil(shown.resetAt / 1000)),
    'RateLimit-Policy': keyPolicy(minute.limit, day.limit),
    RateLimit: `"minute";r=${minute.remaining};t=${secondsUntil(minute.resetAt, now)}, "day";r=${day.remaining};t=${secondsUntil(day.resetAt, now)}`,
  };
  if (month !== undefined) {
    headers['RateLimit-Policy'] += ', ' + monthPolicy(month.limit, month.startAt, month.resetAt);
    headers.RateLimit += `, "month";r=${month.remaining};t=${secondsUntil(month.resetAt, now)}`;
  }
  if (consumer !== undefined) addConsumerHeaders(headers, consumer, now);
  return headers;
}

/** The window X-RateLimit-* shows once the consumer's count: the refusing one, else the fewest remaining (the key's on a tie). */
function consumerBinding(
  keyShown: WindowState,
  consumer: ConsumerWindows,
  refusedBy: RefusingWindow | undefined,
): WindowState {
  if (refusedBy === 'consumer-minute' && consumer.minute) return consumer.minute;
  if (refusedBy === 'consumer-day' && consumer.day) return consumer.day;
  if (refusedBy === 'consumer-month' && consumer.month) return consumer.month;
  if (refusedBy !== undefined) return keyShown;
  let shown = keyShown;
  for (const w of [consumer.minute, consumer.day, consumer.month])
    if (w !== undefined && w.remaining < shown.remaining) shown = w;
  return shown;
}

function addConsumerHeaders(
  headers: { 'RateLimit-Policy': string; RateLimit: string },
  consumer: ConsumerWindows,
  now: number,
): void {
  if (consumer.minute) {
    headers['RateLimit-Policy'] += `, "consumer-minute";q=${consumer.minute.limit};w=${WINDOW_SECONDS.minute}`;
    headers.RateLimit += `, "consumer-minute";r=${consumer.minute.remaining};t=${secondsUntil(consumer.minute.resetAt, now)}`;
  }
  if (consumer.day) {
    headers['RateLimit-Policy'] += `, "consumer-day";q=${consumer.day.limit};w=${WINDOW_SECONDS.day}`;
    headers.RateLimit += `, "consumer-day";r=${consumer.day.remaining};t=${secondsUntil(consumer.day.resetAt, now)}`;
  }
  if (consumer.month) {
    headers['RateLimit-Policy'] +=
      ', "consumer-month"' +
      monthPolicy(consumer.month.limit, consumer.month.startAt, consumer.month.resetAt).slice('"month"'.length);
    headers.RateLimit += `, "consumer-month";r=${consumer.month.remaining};t=${secondsUntil(consumer.month.resetAt, now)}`;
  }
}

/** One window a header may show, under the name headers give it. */
type NamedWindow = readonly [RefusingWindow, WindowState];

/** The windows of a key and its consumer that no hidden list names, in the headers' order. */
function visibleWindows({ minute, day, month, consumer }: KeyWindows, hidden: HiddenWindows): NamedWindow[] {
  const all: Array<[RefusingWindow, WindowState | undefined]> = [
    ['minute', minute],
    ['day', day],
    ['month', month],
    ['consumer-minute', consumer?.minute],
    ['consumer-day', consumer?.day],
    ['consumer-month', consumer?.month],
  ];
  return all.filter((w): w is [RefusingWindow, WindowState] => w[1] !== undefined && !isHidden(hidden, w[0]));
}

/** A window's RateLimit-Policy item; a month's length is its billing month's. */
function policyItem(name: RefusingWindow, state: WindowState): string {
  if (name === 'month' || name === 'consumer-month') {
    const month = state as MonthWindowState;
    return `"${name}"` + monthPolicy(month.limit, month.startAt, month.resetAt).slice('"month"'.length);
  }
  return `"${name}";q=${state.limit};w=${name.endsWith('minute') ? WINDOW_SECONDS.minute : WINDOW_SECONDS.day}`;
}

/**
 * Some windows hidden: the headers name and count only the others, X-RateLimit-* shows the one that
 * refused when it is visible, else the visible one closest to exhaustion (first listed on a tie, as
 * allWindowsHeaders picks). With every window hidden there is nothing to show: no header at all.
 */
function visibleWindowsHeaders(windows: KeyWindows, hidden: HiddenWindows): Record<string, string> {
  const shown = visibleWindows(windows, hidden);
  if (shown.length === 0) return {};
  let binding = shown.find(([name]) => name === windows.refusedBy);
  if (binding === undefined)
    for (const w of shown) if (binding === undefined || w[1].remaining < binding[1].remaining) binding = w;
  const state = binding![1];
  return {
    'X-RateLimit-Limit': String(state.limit),
    'X-RateLimit-Remaining': String(state.remaining),
    'X-RateLimit-Reset': String(Math.ceil(state.resetAt / 1000)),
    'RateLimit-Policy': shown.map(([name, w]) => policyItem(name, w)).join(', '),
    RateLimit: shown
      .map(([name, w]) => `"${name}";r=${w.remaining};t=${secondsUntil(w.resetAt, windows.now)}`)
      .join(', '),
  };
}

/** The month window of a banned key, for its headers: the quota and span only, nothing available. */
export interface BannedMonth {
  limit: number;
  startAt: number;
  resetAt: number;
}

/** A banned key: nothing was counted, and nothing is available until the ban ends. Hidden windows are left out. */
export function bannedRateLimitHeaders(
  limits: WindowLimits,
  bannedUntil: number,
  now: number,
  month?: BannedMonth,
  hidden: HiddenWindows = NONE_HIDDEN,
): Record<string, string> {
  if (hidden !== NONE_HIDDEN) return partlyHiddenBanHeaders(limits, bannedUntil, now, month, hidden);
  const wait = secondsUntil(bannedUntil, now);
  const headers = {
    'X-RateLimit-Limit': String(limits.perMinute),
    'X-RateLimit-Remaining': '0',
    'X-RateLimit-Reset': String(Math.ceil(bannedUntil / 1000)),
    'RateLimit-Policy': keyPolicy(limits.perMinute, limits.perDay),
    RateLimit: `"minute";r=0;t=${wait}, "day";r=0;t=${wait}`,
  };
  if (month !== undefined) {
    headers['RateLimit-Policy'] += ', ' + monthPolicy(month.limit, month.startAt, month.resetAt);
    headers.RateLimit += `, "month";r=0;t=${wait}`;
  }
  return headers;
}

/** A banned key's visible windows, each with nothing available until the ban ends; none visible: no header. */
function partlyHiddenBanHeaders(
  limits: WindowLimits,
  bannedUntil: number,
  now: number,
  month: BannedMonth | undefined,
  hidden: HiddenWindows,
): Record<string, string> {
  const wait = secondsUntil(bannedUntil, now);
  const all: Array<[RefusingWindow, number, string]> = [
    ['minute', limits.perMinute, `"minute";q=${limits.perMinute};w=${WINDOW_SECONDS.minute}`],
    ['day', limits.perDay, `"day";q=${limits.perDay};w=${WINDOW_SECONDS.day}`],
  ];
  if (month !== undefined) all.push(['month', month.limit, monthPolicy(month.limit, month.startAt, month.resetAt)]);
  const shown = all.filter(([name]) => !isHidden(hidden, name));
  if (shown.length === 0) return {};
  return {
    'X-RateLimit-Limit': String(shown[0]![1]),
    'X-RateLimit-Remaining': '0',
    'X-RateLimit-Reset': String(Math.ceil(bannedUntil / 1000)),
    'RateLimit-Policy': shown.map(([, , policy]) => policy).join(', '),
    RateLimit: shown.map(([name]) => `"${name}";r=0;t=${wait}`).join(', '),
  };
}

/** Requests without a valid key are limited per client address, under one per-minute window. */
export function anonymousRateLimitHeaders(window: WindowState, now: number): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(window.limit),
    'X-RateLimit-Remaining': String(window.remaining),
    'X-RateLimit-Reset': String(Math.ceil(window.resetAt / 1000)),
    'RateLimit-Policy': `"anonymous";q=${window.limit};w=${WINDOW_SECONDS.minute}`,
    RateLimit: `"anonymous";r=${window.remaining};t=${secondsUntil(window.resetAt, now)}`,
  };
}

/** A source of uniform random numbers in [0, 1), as Math.random; injected so tests can fix it. */
export type RandomSource = () => number;

/**
 * Retry-After for a 429 with jitter (config `rateLimit.retryAfterJitterSeconds`): the true wait in
 * whole seconds plus a uniformly random 0..jitterSeconds more, so that clients refused together do
 * not all come back in the same second. Never shorter than the wait itself.
 */
export function jitteredRetryAfterSeconds(waitMs: number, jitterSeconds: number, random: RandomSource): string {
  const wait = Number(retryAfterSeconds(waitMs));
  if (jitterSeconds <= 0) return String(wait);
  // random() < 1, so the floor is at most jitterSeconds; the clamp guards a source that returns 1.
  const extra = Math.min(jitterSeconds, Math.floor(random() * (jitterSeconds + 1)));
  return String(wait + Math.max(0, extra));
}
