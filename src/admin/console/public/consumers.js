// @ts-check
// Consumers: the list with a form to create one, and one consumer's page (its limits, the live
// state of its shared windows, its keys), refreshed every few seconds like a key's page.

import { createConsumer, deleteConsumer, getConsumer, listConsumers, listKeys, resetConsumerWindows } from './api.js';
import { byId, el, say } from './dom.js';
import { fmtNumber, fmtTime, keyState, messageOf } from './format.js';
import { consumerHref, keyHref } from './routes.js';
import { askReset } from './window-reset.js';

/** @typedef {import('./types.js').Consumer} Consumer */
/** @typedef {import('./types.js').ConsumerDetail} ConsumerDetail */
/** @typedef {import('./types.js').ConsumerLimits} ConsumerLimits */

const ui = {
  body: byId('consumers-body', HTMLElement),
  form: byId('consumer-create-form', HTMLFormElement),
  name: byId('consumer-create-name', HTMLInputElement),
  perMinute: byId('consumer-create-per-minute', HTMLInputElement),
  perDay: byId('consumer-create-per-day', HTMLInputElement),
  perMonth: byId('consumer-create-per-month', HTMLInputElement),
  createError: byId('consumer-create-error', HTMLElement),
  title: byId('consumer-title', HTMLElement),
  facts: byId('consumer-facts', HTMLElement),
  windows: byId('consumer-windows', HTMLElement),
  keys: byId('consumer-keys-body', HTMLElement),
  resetWindows: byId('consumer-reset-windows', HTMLButtonElement),
  remove: byId('consumer-delete', HTMLButtonElement),
  error: byId('consumer-error', HTMLElement),
};

/** The consumer on the page; the delete button acts on it. */
let shownId = '';
/** Its name and the windows it has limits for: what the reset dialog offers. */
let shown = { name: '', windows: /** @type {import('./types.js').WindowName[]} */ ([]) };

function limitsText(/** @type {ConsumerLimits} */ limits) {
  const parts = [];
  if (limits.perMinute !== undefined) parts.push(`${fmtNumber(limits.perMinute)}/min`);
  if (limits.perDay !== undefined) parts.push(`${fmtNumber(limits.perDay)}/day`);
  if (limits.perMonth !== undefined) parts.push(`${fmtNumber(limits.perMonth)}/month`);
  if (limits.hiddenWindows !== undefined && limits.hiddenWindows.length > 0)
    parts.push(`hidden: ${limits.hiddenWindows.join(', ')}`);
  return parts.join(' · ') || 'none';
}

export async function loadConsumers() {
  const consumers = await listConsumers();
  if (consumers.length === 0) {
    ui.body.replaceChildren(el('tr', {}, el('td', { colspan: 3, class: 'muted', text: 'No consumers yet.' })));
    return;
  }
  ui.body.replaceChildren(
    ...consumers.map((c) =>
      el(
        'tr',
        {},
        el(
          'td',
          {},
          el('a', { href: consumerHref(c.id), text: c.name }),
          el('br'),
          el('span', { class: 'mono muted', text: c.id }),
        ),
        el('td', { text: limitsText(c.limits) }),
        el('td', { text: fmtTime(c.createdAt) }),
      ),
    ),
  );
}

export async function loadConsumer(/** @type {string} */ id) {
  const [consumer, keys] = await Promise.all([getConsumer(id), listKeys()]);
  shownId = consumer.id;
  ui.title.textContent = consumer.name;
  /** @type {Array<[string, string]>} */
  const facts = [
    ['Id', consumer.id],
    ['Limits', limitsText(consumer.limits)],
    ['Billing day', `${consumer.billingDay} of each month, 00:00 UTC`],
    ['Created', fmtTime(consumer.createdAt)],
  ];
  ui.facts.replaceChildren(
    ...facts.map(([name, value]) => el('div', {}, el('dt', { text: name }), el('dd', { text: value }))),
  );
  const windows = /** @type {const} */ (['minute', 'day', 'month']).flatMap((name) => {
    const w = consumer.usage[name];
    if (!w) return [];
    const used = w.limit - w.remaining;
    return [
      el(
        'div',
        { class: 'window' },
        el('span', { text: name }),
        el('meter', { min: 0, max: w.limit, value: used, high: w.limit * 0.8 }),
        el('span', { class: 'muted', text: `${fmtNumber(used)} of ${fmtNumber(w.limit)} used` }),
      ),
    ];
  });
  ui.windows.replaceChildren(
    ...(windows.length ? windows : [el('p', { class: 'muted', text: 'No limits: nothing is shared.' })]),
  );
  shown = {
    name: consumer.name,
    windows: /** @type {const} */ (['minute', 'day', 'month']).filter((name) => consumer.usage[name] !== undefined),
  };
  ui.resetWindows.hidden = shown.windows.length === 0;
  const mine = keys.filter((k) => consumer.keyIds.includes(k.id));
  ui.keys.replaceChildren(
    ...(mine.length
      ? mine.map((k) =>
          el(
            'tr',
            {},
            el('td', {}, el('a', { href: keyHref(k.id), text: k.name || k.id })),
            el('td', { text: k.plan }),
            el('td', { text: keyState(k) }),
          ),
        )
      : [el('tr', {}, el('td', { colspan: 3, class: 'muted', text: 'No keys.' }))]),
  );
}

function optionalNumber(/** @type {HTMLInputElement} */ input) {
  return input.value === '' ? undefined : Number(input.value);
}

export function setUpConsumers() {
  ui.form.addEventListener('submit', async (event) => {
    event.preventDefault();
    ui.createError.textContent = '';
    /** @type {ConsumerLimits} */
    const limits = {};
    const perMinute = optionalNumber(ui.perMinute);
    const perDay = optionalNumber(ui.perDay);
    const perMonth = optionalNumber(ui.perMonth);
    if (perMinute !== undefined) limits.perMinute = perMinute;
    if (perDay !== undefined) limits.perDay = perDay;
    if (perMonth !== undefined) limits.perMonth = perMonth;
    try {
      const created = await createConsumer({ name: ui.name.value, limits });
      ui.form.reset();
      say(`Consumer ${created.name} created.`);
      location.hash = consumerHref(created.id);
    } catch (err) {
      ui.createError.textContent = messageOf(err);
    }
  });
  ui.resetWindows.addEventListener('click', () => {
    const id = shownId;
    askReset({
      what: `“${shown.name}” (${id})`,
      windows: shown.windows,
      errorLine: ui.error,
      send: (windows) => resetConsumerWindows(id, windows),
      after: () => loadConsumer(id),
    });
  });
  ui.remove.addEventListener('click', async () => {
    ui.error.textContent = '';
    try {
      await deleteConsumer(shownId);
      say('Consumer deleted.');
      location.hash = '#/consumers';
    } catch (err) {
      ui.error.textContent = messageOf(err);
    }
  });
}
