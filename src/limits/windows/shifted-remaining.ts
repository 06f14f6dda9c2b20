import type { KeyDecision, WindowState } from '../types';

type Allowed = Extract<KeyDecision, { outcome: 'allowed' }>;

/**
 * An admitted decision with `units` added to the remaining of every window it shows, the key's and
 * its consumer's (negative: taken off). Leases show a take's windows without the lease's units
 * (leasing-key-limiter.ts) and pass quota thresholds with them (product/notifications.ts): one shift.
 */
export function shiftedRemaining(decision: Allowed, units: number): Allowed {
  const shift = <W extends WindowState>(state: W): W => ({ ...state, remaining: state.remaining + units });
  const shifted: Allowed = { ...decision, minute: shift(decision.minute), day: shift(decision.day) };
  if (decision.month) shifted.month = shift(decision.month);
  const c = decision.consumer;
  if (c) {
    shifted.consumer = {};
    if (c.minute) shifted.consumer.minute = shift(c.minute);
    if (c.day) shifted.consumer.day = shift(c.day);
    if (c.month) shifted.consumer.month = shift(c.month);
  }
  return shifted;
}
