// @ts-check
// The plan drop-downs (create, change, filter): the server's plans, then any other a key is on.

import { el } from './dom.js';
import { planChoices } from './format.js';
import { offeredPlanNames } from './state.js';

/**
 * Fills every `.plan-select`, keeping what each had chosen; a select with `data-any` gets that
 * choice first with the empty value (the filter's "Any plan").
 * @param {readonly string[]} [plansOnKeys]
 */
export async function fillPlanSelects(plansOnKeys = []) {
  const plans = planChoices(await offeredPlanNames(), plansOnKeys);
  for (const select of document.querySelectorAll('select.plan-select')) {
    if (!(select instanceof HTMLSelectElement)) continue;
    const chosen = select.value;
    const options = plans.map((p) => el('option', { value: p, text: p }));
    if (select.dataset.any) options.unshift(el('option', { value: '', text: select.dataset.any }));
    select.replaceChildren(...options);
    if (chosen) select.value = chosen;
  }
}
