import type { ConsumerShare, RefusingWindow, WindowLimits, WindowName } from './types';

/**
 * Hidden windows (CONTRACT §4): a plan (`plans.<name>.hiddenWindows`), a key's `limits` or a
 * consumer's `limits` (`hiddenWindows`) may list windows that are enforced as any other but named
 * and counted in no header, and whose 429 says `"window": "hidden"`. Operators use them for a
 * protective limit they do not want clients to see or plan around.
 *
 * A request's hidden windows are a bit set over the six windows that can refuse it, so that
 * learning them allocates nothing on the request path.
 */
export type HiddenWindows = number;

/** No window hidden: what every key had before hidden windows existed. */
export const NONE_HIDDEN: HiddenWindows = 0;

/** The windows a list may name, in the order a normalised list keeps them. */
export const HIDEABLE_WINDOWS: readonly WindowName[] = ['minute', 'day', 'month'];

const BIT: Readonly<Record<RefusingWindow, number>> = {
  minute: 1,
  day: 2,
  month: 4,
  'consumer-minute': 8,
  'consumer-day': 16,
  'consumer-month': 32,
};

/** The consumer's bits sit above the key's: a consumer's `minute` hides `consumer-minute`. */
const CONSUMER_SHIFT = 3;

export function isHidden(hidden: HiddenWindows, window: RefusingWindow): boolean {
  return (hidden & BIT[window]) !== 0;
}

/** The bits of a key's (or plan's) list: its own windows. */
export function ownHiddenWindows(names: readonly WindowName[] | undefined): HiddenWindows {
  let mask = 0;
  if (names) for (const name of names) mask |= BIT[name];
  return mask;
}

/** The bits of a consumer's list: the consumer-* windows its keys share. */
export function consumerHiddenWindows(share: ConsumerShare | undefined): HiddenWindows {
  return ownHiddenWindows(share?.limits.hiddenWindows) << CONSUMER_SHIFT;
}

/**
 * The windows hidden for a request of this key: the key's own list when its `limits` carry one
 * (an empty list shows every window of a plan that hides some), else its plan's; and its consumer's.
 */
export function hiddenWindowsOf(
  own: Pick<WindowLimits, 'hiddenWindows'> | null,
  planHidden: HiddenWindows,
  share: ConsumerShare | undefined,
): HiddenWindows {
  const key = own?.hiddenWindows !== undefined ? ownHiddenWindows(own.hiddenWindows) : planHidden;
  return share === undefined ? key : key | consumerHiddenWindows(share);
}

export function isHideableWindow(value: unknown): value is WindowName {
  return value === 'minute' || value === 'day' || value === 'month';
}

/** A list in canonical order without repeats, so that equal lists encode alike; null when it is not a list of window names. */
export function normalisedHiddenWindows(value: unknown): WindowName[] | null {
  if (!Array.isArray(value) || !value.every(isHideableWindow)) return null;
  return HIDEABLE_WINDOWS.filter((name) => value.includes(name));
}
