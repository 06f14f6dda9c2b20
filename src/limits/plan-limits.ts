import type { PlanConfig } from '../shared/config';
import type { ConsumerShare, WindowLimits } from './types';
import { hiddenWindowsOf, NONE_HIDDEN, ownHiddenWindows, type HiddenWindows } from './hidden-windows';

export type Plans = Readonly<Record<string, PlanConfig>>;

/** Limits of a plan, or null when the plan leaves them to each key (enterprise) or does not exist. */
export function planLimitsOf(plans: Plans, plan: string): WindowLimits | null {
  const p = Object.hasOwn(plans, plan) ? plans[plan] : undefined;
  if (!p || p.perMinute === undefined || p.perDay === undefined) return null;
  return p.perMonth === undefined
    ? { perMinute: p.perMinute, perDay: p.perDay }
    : { perMinute: p.perMinute, perDay: p.perDay, perMonth: p.perMonth };
}

/**
 * The limits a key is held to: its own override, else its plan's. Null only when neither exists,
 * which the key service never lets happen on write but a config change (plan removed, or turned
 * into a per-key plan) can cause later; the gateway then refuses the request rather than guess.
 */
export function effectiveLimits(
  record: { plan: string; limits: WindowLimits | null },
  plans: Plans,
): WindowLimits | null {
  return record.limits ? { ...record.limits } : planLimitsOf(plans, record.plan);
}

/**
 * The same answers for the request path, computed once from config: one object per plan, so that
 * a request allocates nothing to learn its limits.
 */
export class PlanBook {
  private readonly limitsByPlan = new Map<string, WindowLimits>();
  private readonly shadowedPlans = new Set<string>();
  private readonly maxInFlightByPlan = new Map<string, number>();
  private readonly hiddenByPlan = new Map<string, HiddenWindows>();

  constructor(plans: Plans) {
    for (const name of Object.keys(plans)) {
      const limits = planLimitsOf(plans, name);
      if (limits) this.limitsByPlan.set(name, limits);
      if (plans[name]!.shadow === true) this.shadowedPlans.add(name);
      const maxInFlight = plans[name]!.maxInFlight;
      if (maxInFlight !== undefined) this.maxInFlightByPlan.set(name, maxInFlight);
      const hidden = ownHiddenWindows(plans[name]!.hiddenWindows);
      if (hidden !== NONE_HIDDEN) this.hiddenByPlan.set(name, hidden);
    }
  }

  /** A key's own `maxInFlight`, else its plan's; undefined: no concurrency limit. */
  maxInFlightOf(record: { plan: string; limits: WindowLimits | null }): number | undefined {
    return record.limits?.maxInFlight ?? this.maxInFlightByPlan.get(record.plan);
  }

  /** The windows a request of this key shows in no header: the key's own list, else its plan's, and its consumer's (CONTRACT §4). */
  hiddenWindowsOf(
    record: { plan: string; limits: WindowLimits | null },
    consumer: ConsumerShare | undefined,
  ): HiddenWindows {
    return hiddenWindowsOf(record.limits, this.hiddenByPlan.get(record.plan) ?? NONE_HIDDEN, consumer);
  }

  /** The key's own limits, else its plan's; null when neither exists. */
  limitsOf(record: { plan: string; limits: WindowLimits | null }): WindowLimits | null {
    return record.limits ?? this.limitsByPlan.get(record.plan) ?? null;
  }

  /** A key's own `shadow` wins over its plan's, in either direction. */
  isShadowed(record: { plan: string; limits: WindowLimits | null }): boolean {
    return record.limits?.shadow ?? this.shadowedPlans.has(record.plan);
  }
}
