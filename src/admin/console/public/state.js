// @ts-check
// What more than one view reads: the plans the server offers (GET /admin/plans), asked once per
// sign-in. Each view keeps the rest of its state to itself (the key list, the key shown).

import { getPlans } from './api.js';

/** @typedef {import('./types.js').Plan} Plan */

/** @type {Promise<Plan[]> | null} */
let plans = null;

/** The configured plans, in the config's order; asked on first use after each sign-in. */
export function offeredPlans() {
  if (!plans) {
    const asked = getPlans().then((list) => list.plans);
    // A failed answer is not kept: the next view asks again.
    asked.catch(() => {
      if (plans === asked) plans = null;
    });
    plans = asked;
  }
  return plans;
}

/** The plans' names, in the config's order. */
export async function offeredPlanNames() {
  return (await offeredPlans()).map((plan) => plan.name);
}

/** Signing out forgets them: the next operator may be looking at another config. */
export function forgetPlans() {
  plans = null;
}
