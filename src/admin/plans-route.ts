import express from 'express';

/** A plan as configured (`plans.<name>` in the config): both limits, or neither for a per-key plan. */
export interface ConfiguredPlan {
  perMinute?: number;
  perDay?: number;
  shadow?: boolean;
  hiddenWindows?: readonly string[];
}

/** One plan as GET /admin/plans shows it; null limits mean each key carries its own (enterprise). */
export interface PlanView {
  name: string;
  perMinute: number | null;
  perDay: number | null;
  shadow: boolean;
  /** Only for a plan that hides windows (CONTRACT §4): enforced, named in no header. */
  hiddenWindows?: string[];
}

/** The configured plans in the config's order, for the console's plan choices and any operator tool. */
export function planViews(plans: Readonly<Record<string, ConfiguredPlan>>): PlanView[] {
  return Object.entries(plans).map(([name, plan]) => ({
    name,
    perMinute: plan.perMinute ?? null,
    perDay: plan.perDay ?? null,
    shadow: plan.shadow ?? false,
    ...(plan.hiddenWindows && plan.hiddenWindows.length > 0 ? { hiddenWindows: [...plan.hiddenWindows] } : {}),
  }));
}

/** GET /plans under the admin router, so behind its token check: `{plans: PlanView[]}`. */
export function plansRouter(plans: () => Readonly<Record<string, ConfiguredPlan>>): express.Router {
  const router = express.Router();
  router.get('/plans', (_req, res) => {
    res.json({ plans: planViews(plans()) });
  });
  return router;
}
