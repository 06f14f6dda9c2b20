// @ts-check
// Keys: the list with its search and filters, and the form that creates a key.

import { createKey, listKeys } from './api.js';
import { byId, el } from './dom.js';
import { fmtTime, keyState, limitsFrom, localToIso, messageOf } from './format.js';
import { fillPlanSelects } from './plan-select.js';
import { keyHref } from './routes.js';
import { showSecret } from './secret.js';

/** @typedef {import('./types.js').Key} Key */
/** @typedef {import('./types.js').NewKey} NewKey */

const ui = {
  search: byId('key-search', HTMLInputElement),
  planFilter: byId('key-plan-filter', HTMLSelectElement),
  stateFilter: byId('key-state-filter', HTMLSelectElement),
  filterForm: byId('key-filter', HTMLFormElement),
  body: byId('keys-body', HTMLElement),
  newKey: byId('new-key', HTMLButtonElement),
  createForm: byId('create-form', HTMLFormElement),
  createName: byId('create-name', HTMLInputElement),
  createPlan: byId('create-plan', HTMLSelectElement),
  createPerMinute: byId('create-per-minute', HTMLInputElement),
  createPerDay: byId('create-per-day', HTMLInputElement),
  createExpires: byId('create-expires', HTMLInputElement),
  createCancel: byId('create-cancel', HTMLButtonElement),
  createError: byId('create-error', HTMLElement),
};

/** Every key, as last loaded; the filters work on it without asking again. */
/** @type {Key[]} */
let allKeys = [];

export async function loadKeys() {
  allKeys = await listKeys();
  await fillPlanSelects(allKeys.map((k) => k.plan));
  renderKeys();
}

function renderKeys() {
  const query = ui.search.value.trim().toLowerCase();
  const plan = ui.planFilter.value;
  const state = ui.stateFilter.value;
  const now = Date.now();
  const shown = allKeys
    .filter((k) => !query || k.name.toLowerCase().includes(query) || k.id.toLowerCase().includes(query))
    .filter((k) => !plan || k.plan === plan)
    .filter((k) => !state || keyState(k, now) === state)
    .sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1));
  if (shown.length === 0) {
    ui.body.replaceChildren(
      el('tr', {}, el('td', { colspan: 7, class: 'muted', text: allKeys.length ? 'No key matches.' : 'No keys yet.' })),
    );
    return;
  }
  ui.body.replaceChildren(...shown.map((k) => keyRow(k, keyState(k, now))));
}

/**
 * @param {Key} k
 * @param {string} state
 */
function keyRow(k, state) {
  return el(
    'tr',
    {},
    el('td', {}, el('a', { href: keyHref(k.id), text: k.name || '(no name)' })),
    el('td', { class: 'mono', text: k.id }),
    el('td', { text: k.plan }),
    el('td', {}, el('span', { class: `badge ${state}`, text: state })),
    el('td', { text: fmtTime(k.createdAt) }),
    el('td', { text: k.expiresAt ? fmtTime(k.expiresAt) : 'never' }),
    el('td', { text: k.lastUsedAt ? fmtTime(k.lastUsedAt) : 'never' }),
  );
}

/** The create form as the API's body. */
function newKeyBody() {
  /** @type {NewKey} */
  const body = { name: ui.createName.value.trim(), plan: ui.createPlan.value };
  const limits = limitsFrom(ui.createPerMinute.value, ui.createPerDay.value);
  if (limits) body.limits = limits;
  const expiresAt = localToIso(ui.createExpires.value);
  if (expiresAt) body.expiresAt = expiresAt;
  return body;
}

export function setUpKeysList() {
  for (const control of [ui.search, ui.planFilter, ui.stateFilter]) control.addEventListener('input', renderKeys);
  ui.filterForm.addEventListener('submit', (event) => event.preventDefault());
  ui.newKey.addEventListener('click', () => {
    ui.createForm.hidden = false;
    ui.createError.textContent = '';
    ui.createName.focus();
  });
  ui.createCancel.addEventListener('click', () => {
    ui.createForm.reset();
    ui.createForm.hidden = true;
    ui.newKey.focus();
  });
  ui.createForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    ui.createError.textContent = '';
    try {
      const created = await createKey(newKeyBody());
      ui.createForm.reset();
      ui.createForm.hidden = true;
      showSecret(`New key “${created.name}” (${created.id})`, created.key);
      await loadKeys();
    } catch (err) {
      ui.createError.textContent = messageOf(err);
    }
  });
}
