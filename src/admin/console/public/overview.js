// @ts-check
// Overview: the last 15 minutes of traffic (GET /admin/stats), health, bans, two charts, and the
// busiest keys of the last 5 minutes across every instance (GET /admin/stats/top-keys).

import { getStats, getTopKeys } from './api.js';
import { loadConfigStatus } from './config-status.js';
import { drawStackedBars, PALETTE } from './charts.js';
import { byId, el } from './dom.js';
import { fmtNumber, orderedKeys } from './format.js';
import { offeredPlanNames } from './state.js';
import { keyHref } from './routes.js';

/** @typedef {import('./types.js').StatsPoint} StatsPoint */
/** @typedef {import('./types.js').BusyKey} BusyKey */

export const REFRESH_MS = 5000;
const STATUS_ORDER = ['2xx', '3xx', '4xx', '429', '5xx'];
/** @type {Record<string, string | undefined>} */
const STATUS_COLOURS = { '2xx': PALETTE[0], '3xx': PALETTE[6], '4xx': PALETTE[2], 429: PALETTE[3], '5xx': PALETTE[4] };
const PLAN_COLOURS = [PALETTE[1], PALETTE[2], PALETTE[4], PALETTE[6], PALETTE[5], PALETTE[0], PALETTE[3]];
const WINDOWS = ['minute', 'day', 'month', 'ban', 'anonymous'];

const ui = {
  requests: byId('total-requests', HTMLElement),
  rejections: byId('total-rejections', HTMLElement),
  bans: byId('active-bans', HTMLElement),
  health: { store: byId('health-store', HTMLElement), upstream: byId('health-upstream', HTMLElement) },
  statusChart: byId('chart-status', HTMLElement),
  statusLegend: byId('legend-status', HTMLElement),
  planChart: byId('chart-plan', HTMLElement),
  planLegend: byId('legend-plan', HTMLElement),
  rejectionsBody: byId('rejections-body', HTMLElement),
  topKeysBody: byId('top-keys-body', HTMLElement),
  updated: byId('overview-updated', HTMLElement),
  config: byId('config-status', HTMLElement),
};

export async function loadOverview() {
  // The busiest keys render on their own, below everything else: the counts above never wait for them.
  const busiest = getTopKeys().then(
    (top) => showTopKeys(top.keys),
    (/** @type {unknown} */ err) => err,
  );
  const [stats, plans] = await Promise.all([getStats(), offeredPlanNames(), loadConfigStatus(ui.config)]);
  ui.requests.textContent = fmtNumber(stats.totals.requests);
  ui.rejections.textContent = fmtNumber(stats.totals.byStatus['429'] ?? 0);
  ui.bans.textContent = stats.activeBans === null ? 'unknown' : fmtNumber(stats.activeBans);
  for (const [name, node] of Object.entries(ui.health)) {
    const value = stats.health[name] ?? 'unknown';
    node.textContent = value === 'ok' ? 'OK' : value;
    node.className = `card-value health ${value}`;
  }
  const step = stats.stepSeconds;
  const labelOf = (/** @type {StatsPoint} */ p) =>
    new Date(p.start).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  const statuses = orderedKeys(stats.totals.byStatus, STATUS_ORDER);
  drawStackedBars(ui.statusChart, ui.statusLegend, stats.points, statuses, {
    valueOf: (p, s) => (p.byStatus[s] ?? 0) / step,
    labelOf,
    unit: 'req/s',
    colours: statuses.map((s) => STATUS_COLOURS[s] ?? PALETTE[5]),
    empty: 'No requests in the last 15 minutes',
  });
  const planSeries = orderedKeys(stats.totals.byPlan, [...plans, 'anonymous']);
  drawStackedBars(ui.planChart, ui.planLegend, stats.points, planSeries, {
    valueOf: (p, s) => (p.byPlan[s] ?? 0) / step,
    labelOf,
    unit: 'req/s',
    colours: planSeries.map((_, i) => PLAN_COLOURS[i % PLAN_COLOURS.length] ?? ''),
    empty: 'No requests in the last 15 minutes',
  });
  const byWindow = stats.totals.rejectionsByWindow;
  ui.rejectionsBody.replaceChildren(
    ...orderedKeys(byWindow, WINDOWS, true).map((w) =>
      el('tr', {}, el('td', { text: w }), el('td', { class: 'num', text: fmtNumber(byWindow[w] ?? 0) })),
    ),
  );
  ui.updated.textContent = `Last 15 minutes · updated ${new Date(stats.generatedAt).toLocaleTimeString()} · refreshed every ${REFRESH_MS / 1000} s while this tab is visible`;
  const failed = await busiest;
  if (failed !== undefined) throw failed;
}

/** The busiest keys, most requests first; each links to its key's page. */
function showTopKeys(/** @type {BusyKey[]} */ keys) {
  if (keys.length === 0) {
    ui.topKeysBody.replaceChildren(
      el('tr', {}, el('td', { colspan: 3, class: 'muted', text: 'No key traffic in the last 5 minutes' })),
    );
    return;
  }
  ui.topKeysBody.replaceChildren(
    ...keys.map((k) =>
      el(
        'tr',
        {},
        el('td', {}, el('a', { href: keyHref(k.keyId), text: k.name || k.keyId })),
        el('td', { class: 'num', text: fmtNumber(k.requests) }),
        el('td', { class: 'num', text: fmtNumber(k.rateLimited) }),
      ),
    ),
  );
}
