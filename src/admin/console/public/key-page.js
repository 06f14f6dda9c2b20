// @ts-check
// One key's page: its facts, live windows and 30-day usage, and the forms that change, rotate,
// unban and revoke it. Refreshed every few seconds without touching a form being typed in.

import { addCredits, getKey, getKeyUsage, liftBan, resetKeyWindows, revokeKey, rotateKey, updateKey } from './api.js';
import { drawStackedBars, PALETTE } from './charts.js';
import { byId, el, say } from './dom.js';
import {
  fmtNumber,
  fmtTime,
  isoToLocal,
  keyLimitsText,
  keyState,
  limitsFrom,
  localToIso,
  messageOf,
  withKeptLimits,
} from './format.js';
import { fillPlanSelects } from './plan-select.js';
import { consumerHref } from './routes.js';
import { showSecret } from './secret.js';
import { accessFacts, fillAccessFields, withAccessChanges } from './access-fields.js';
import { askReset } from './window-reset.js';

/** @typedef {import('./types.js').KeyDetail} KeyDetail */
/** @typedef {import('./types.js').KeyUsage} KeyUsage */
/** @typedef {import('./types.js').UsageDay} UsageDay */
/** @typedef {import('./types.js').KeyChange} KeyChange */

const ui = {
  title: byId('key-title', HTMLElement),
  state: byId('key-state', HTMLElement),
  facts: byId('key-facts', HTMLElement),
  windows: {
    minute: { meter: byId('window-minute', HTMLMeterElement), text: byId('window-minute-text', HTMLElement) },
    day: { meter: byId('window-day', HTMLMeterElement), text: byId('window-day-text', HTMLElement) },
  },
  month: {
    row: byId('window-month-row', HTMLElement),
    meter: byId('window-month', HTMLMeterElement),
    text: byId('window-month-text', HTMLElement),
  },
  creditsForm: byId('credits-form', HTMLFormElement),
  creditsUnits: byId('credits-units', HTMLInputElement),
  usageChart: byId('chart-usage', HTMLElement),
  usageLegend: byId('legend-usage', HTMLElement),
  revokedNote: byId('key-revoked-note', HTMLElement),
  actions: byId('key-actions', HTMLElement),
  editForm: byId('edit-form', HTMLFormElement),
  editName: byId('edit-name', HTMLInputElement),
  editPlan: byId('edit-plan', HTMLSelectElement),
  editPerMinute: byId('edit-per-minute', HTMLInputElement),
  editPerDay: byId('edit-per-day', HTMLInputElement),
  editExpires: byId('edit-expires', HTMLInputElement),
  editError: byId('edit-error', HTMLElement),
  rotateForm: byId('rotate-form', HTMLFormElement),
  rotateGrace: byId('rotate-grace', HTMLInputElement),
  resetWindows: byId('reset-windows', HTMLButtonElement),
  unban: byId('unban', HTMLButtonElement),
  revoke: byId('revoke', HTMLButtonElement),
  actionError: byId('action-error', HTMLElement),
  revokeDialog: byId('revoke-dialog', HTMLDialogElement),
  revokeText: byId('revoke-text', HTMLElement),
  revokeConfirm: byId('revoke-confirm', HTMLButtonElement),
};

/** The key on the page, as last loaded; the actions act on it. */
/** @type {KeyDetail | null} */
let shownKey = null;
/** The limit fields as the form was filled: a save sends limits only when the operator changed them. */
let limitsAsFilled = '';

/** The whole page, the change form included. */
export async function loadKey(/** @type {string} */ id) {
  const key = await refreshKey(id);
  await fillPlanSelects([key.plan]);
  fillEditForm(key);
}

/** The refresh: windows, ban and facts, without touching a form the operator may be typing in. */
export async function refreshKey(/** @type {string} */ id) {
  const [key, usage] = await Promise.all([getKey(id), getKeyUsage(id, 30)]);
  shownKey = key;
  renderKey(key);
  renderUsage(usage);
  return key;
}

function renderKey(/** @type {KeyDetail} */ key) {
  const state = keyState(key);
  const banned = Boolean(key.bannedUntil && Date.parse(key.bannedUntil) > Date.now());
  const badge = banned && state === 'active' ? 'banned' : state;
  ui.title.textContent = key.name || '(no name)';
  ui.state.textContent = badge;
  ui.state.className = `badge ${badge}`;
  /** @type {Array<[string, string]>} */
  const facts = [
    ['Id', key.id],
    ['Plan', key.plan],
    ['Consumer', key.consumerId ?? 'none'],
    ['Limits', keyLimitsText(key.limits)],
    ['Created', fmtTime(key.createdAt)],
    ['Expires', key.expiresAt ? fmtTime(key.expiresAt) : 'never'],
    ['Last used', key.lastUsedAt ? fmtTime(key.lastUsedAt) : 'never'],
    ['Banned until', key.bannedUntil ? fmtTime(key.bannedUntil) : 'not banned'],
    [
      'Previous secret works until',
      key.previousKeyExpiresAt && !key.revokedAt ? fmtTime(key.previousKeyExpiresAt) : '–',
    ],
    ['Revoked', key.revokedAt ? fmtTime(key.revokedAt) : '–'],
    ...accessFacts(key),
  ];
  // One line per fact (console.css), the whole value in its title: a value that arrives on a later
  // refresh ("Last used" once the usage batch is written) must not wrap and push the page down.
  ui.facts.replaceChildren(
    ...facts.map(([name, value]) => el('div', {}, el('dt', { text: name, title: name }), factValue(name, value))),
  );
  for (const name of /** @type {const} */ (['minute', 'day'])) {
    const w = key.usage[name];
    const { meter, text } = ui.windows[name];
    const used = w.limit - w.remaining;
    meter.max = w.limit;
    meter.value = used;
    meter.high = w.limit * 0.8;
    text.textContent = `${fmtNumber(used)} of ${fmtNumber(w.limit)} used · resets ${new Date(w.reset * 1000).toLocaleTimeString()}`;
  }
  renderMonth(key);
  const revoked = Boolean(key.revokedAt);
  ui.unban.disabled = !banned;
  ui.revoke.disabled = revoked;
  // A revoked key is final: nothing to change, rotate or lift.
  ui.actions.hidden = revoked;
  ui.revokedNote.hidden = !revoked;
}

/** A fact's value; the consumer links to its page (#/consumers/<id>). */
function factValue(/** @type {string} */ name, /** @type {string} */ value) {
  if (name !== 'Consumer' || value === 'none') return el('dd', { text: value, title: value });
  return el('dd', { title: value }, el('a', { href: consumerHref(value), id: 'key-consumer', text: value }));
}

/** The month window, only for a key that has one: its bar, credits and the day it starts afresh; the credits form with it. */
function renderMonth(/** @type {KeyDetail} */ key) {
  const month = key.usage.month;
  ui.month.row.hidden = !month;
  ui.creditsForm.hidden = !month || Boolean(key.revokedAt);
  if (!month) return;
  const used = month.limit - month.remaining;
  ui.month.meter.max = month.limit;
  ui.month.meter.value = used;
  ui.month.meter.high = month.limit * 0.8;
  const credits = month.credits > 0 ? ` (${fmtNumber(month.credits)} credited)` : '';
  // The reset is 00:00 UTC on the billing day: shown as a UTC date, the same for every operator.
  const resetDay = new Date(month.reset * 1000).toISOString().slice(0, 10);
  ui.month.text.textContent = `${fmtNumber(used)} of ${fmtNumber(month.limit)}${credits} used · resets ${resetDay} 00:00 UTC (billing day ${key.billingDay ?? 1})`;
}

/** @type {Record<string, keyof Omit<UsageDay, 'date'>>} */
const USAGE_SERIES = { admitted: 'admitted', 'rate limited': 'rateLimited', banned: 'banned' };

function renderUsage(/** @type {KeyUsage} */ usage) {
  drawStackedBars(ui.usageChart, ui.usageLegend, usage.days, Object.keys(USAGE_SERIES), {
    valueOf: (d, s) => {
      const field = USAGE_SERIES[s];
      return field ? d[field] : 0;
    },
    labelOf: (d) => d.date,
    unit: 'requests',
    colours: [PALETTE[1], PALETTE[3], PALETTE[4]],
    empty: 'No requests in the last 30 days',
    integers: true,
  });
  const total = usage.days.reduce((sum, d) => sum + d.admitted, 0);
  ui.usageChart.setAttribute(
    'aria-label',
    `Requests per day over the last ${usage.days.length} days: ${total} admitted in all`,
  );
}

function limitFields() {
  return { perMinute: ui.editPerMinute.value.trim(), perDay: ui.editPerDay.value.trim() };
}

function fillEditForm(/** @type {KeyDetail} */ key) {
  ui.editName.value = key.name;
  ui.editPlan.value = key.plan;
  // The limits the key is held to now: the admin API does not say whether they are the plan's or an
  // override, so the form shows them either way, and saving a new name or expiry leaves them alone.
  ui.editPerMinute.value = key.limits ? String(key.limits.perMinute) : '';
  ui.editPerDay.value = key.limits ? String(key.limits.perDay) : '';
  limitsAsFilled = JSON.stringify(limitFields());
  ui.editExpires.value = isoToLocal(key.expiresAt);
  fillAccessFields(key);
  ui.editError.textContent = '';
  ui.actionError.textContent = '';
}

/** The change form as the API's body, or a sentence saying what is missing. */
function keyChange() {
  const fields = limitFields();
  if (Boolean(fields.perMinute) !== Boolean(fields.perDay)) {
    return "Give both limits (per minute and per day), or empty both to use the plan's limits.";
  }
  /** @type {KeyChange} */
  const body = { name: ui.editName.value.trim(), plan: ui.editPlan.value, expiresAt: localToIso(ui.editExpires.value) };
  if (JSON.stringify(fields) !== limitsAsFilled)
    body.limits = withKeptLimits(shownKey?.limits, limitsFrom(fields.perMinute, fields.perDay) ?? null);
  return withAccessChanges(body);
}

/**
 * An action on the shown key; its failure is written under the form it came from.
 * @param {HTMLElement} errorLine
 * @param {(key: KeyDetail) => Promise<void>} action
 */
async function onShownKey(errorLine, action) {
  errorLine.textContent = '';
  if (!shownKey) return;
  try {
    await action(shownKey);
  } catch (err) {
    errorLine.textContent = messageOf(err);
  }
}

export function setUpKeyPage() {
  ui.editForm.addEventListener('submit', (event) => {
    event.preventDefault();
    say('');
    onShownKey(ui.editError, async (key) => {
      const body = keyChange();
      if (typeof body === 'string') throw new Error(body);
      await updateKey(key.id, body);
      say(`Saved the changes to “${body.name}”.`);
      await loadKey(key.id);
    });
  });
  ui.rotateForm.addEventListener('submit', (event) => {
    event.preventDefault();
    say('');
    onShownKey(ui.actionError, async (key) => {
      const rotated = await rotateKey(key.id, Number(ui.rotateGrace.value));
      await loadKey(key.id);
      // The secret panel's home is the keys section; here it shows above the key's facts.
      showSecret(
        `New secret for “${rotated.name}”: the old one works until ${fmtTime(rotated.previousKeyExpiresAt)}`,
        rotated.key,
        ui.facts,
      );
    });
  });
  ui.creditsForm.addEventListener('submit', (event) => {
    event.preventDefault();
    say('');
    onShownKey(ui.actionError, async (key) => {
      const units = Number(ui.creditsUnits.value);
      await addCredits(key.id, units);
      ui.creditsUnits.value = '';
      say(`Added ${fmtNumber(units)} credits to “${key.name}” for this billing month.`);
      await refreshKey(key.id);
    });
  });
  ui.resetWindows.addEventListener('click', () => {
    const key = shownKey;
    if (!key) return;
    askReset({
      what: `“${key.name}” (${key.id})`,
      windows: key.usage.month ? ['minute', 'day', 'month'] : ['minute', 'day'],
      errorLine: ui.actionError,
      send: (windows) => resetKeyWindows(key.id, windows),
      after: () => refreshKey(key.id),
    });
  });
  ui.unban.addEventListener('click', () =>
    onShownKey(ui.actionError, async (key) => {
      await liftBan(key.id);
      say(`Lifted the ban on “${key.name}”.`);
      await refreshKey(key.id);
    }),
  );
  setUpRevoke();
}

/** Revoke asks first, in a modal dialog naming the key and its id. */
function setUpRevoke() {
  ui.revoke.addEventListener('click', () => {
    if (!shownKey) return;
    say('');
    ui.revokeText.textContent = `Revoke “${shownKey.name}” (${shownKey.id})? Every request with this key, and with a previous secret still in its grace period, will get 401 from then on. This cannot be undone.`;
    ui.revokeConfirm.textContent = `Revoke “${shownKey.name}”`;
    ui.revokeDialog.showModal();
  });
  ui.revokeDialog.addEventListener('close', async () => {
    if (ui.revokeDialog.returnValue !== 'revoke') return;
    ui.revokeDialog.returnValue = '';
    await onShownKey(ui.actionError, async (key) => {
      await revokeKey(key.id);
      say(`Revoked “${key.name}”.`);
      await loadKey(key.id);
    });
    ui.revoke.focus();
  });
}
