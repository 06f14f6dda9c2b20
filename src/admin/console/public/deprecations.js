// @ts-check
// Deprecations: each deprecated operation, the days to its sunset, and the keys still calling it.

import { getDeprecations } from './api.js';
import { byId, el } from './dom.js';
import { daysUntil, fmtNumber, fmtTime } from './format.js';
import { keyHref } from './routes.js';

/** @typedef {import('./types.js').DeprecatedRoute} DeprecatedRoute */
/** @typedef {import('./types.js').Caller} Caller */

const ui = {
  note: byId('deprecations-note', HTMLElement),
  body: byId('deprecations-body', HTMLElement),
};

export async function loadDeprecations() {
  const report = await getDeprecations();
  ui.note.textContent = `Keys that called each deprecated operation in the last ${report.lookbackDays} days.`;
  if (report.routes.length === 0) {
    ui.body.replaceChildren(el('p', { class: 'muted', text: 'No operation is deprecated.' }));
    return;
  }
  const now = Date.now();
  ui.body.replaceChildren(...report.routes.map((r) => routePanel(r, now)));
}

/** One operation: its heading with the sunset, and a table of its callers. */
function routePanel(/** @type {DeprecatedRoute} */ r, /** @type {number} */ now) {
  const daysLeft = daysUntil(r.sunset, now);
  const sunset =
    daysLeft > 0
      ? ` · sunset ${fmtTime(r.sunset)}, ${fmtNumber(daysLeft)} days left`
      : ` · past its sunset (${fmtTime(r.sunset)})`;
  const head = el(
    'h3',
    {},
    el('code', { text: `${r.method} ${r.route}` }),
    el('span', { class: 'muted', text: sunset }),
  );
  const rows = r.callers.length
    ? r.callers.map(callerRow)
    : [el('tr', {}, el('td', { colspan: 4, class: 'muted', text: 'No key called it.' }))];
  const columns = el(
    'tr',
    {},
    el('th', { scope: 'col', text: 'Key' }),
    el('th', { scope: 'col', text: 'Plan' }),
    el('th', { scope: 'col', class: 'num', text: 'Calls' }),
    el('th', { scope: 'col', text: 'Last call' }),
  );
  return el('div', { class: 'panel' }, head, el('table', {}, el('thead', {}, columns), el('tbody', {}, ...rows)));
}

function callerRow(/** @type {Caller} */ c) {
  return el(
    'tr',
    {},
    el('td', {}, el('a', { href: keyHref(c.keyId), text: c.name || c.keyId })),
    el('td', { text: c.plan || '–' }),
    el('td', { class: 'num', text: fmtNumber(c.count) }),
    el('td', { text: fmtTime(c.lastCallAt) }),
  );
}
