// The operator console: plain browser JavaScript, no build step. It talks only to the admin API on
// this origin with the admin token as a bearer token; the token lives in this tab's sessionStorage.
// Every value from the API reaches the page through textContent or attributes, never as HTML.

const TOKEN_KEY = 'asg-admin-token';
const REFRESH_MS = 5000;
const KNOWN_PLANS = ['free', 'pro', 'business', 'enterprise'];
const STATUS_ORDER = ['2xx', '3xx', '4xx', '429', '5xx'];

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') node.textContent = String(value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) node.append(child);
  return node;
}

const SVG_NS = 'http://www.w3.org/2000/svg';
function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

// ---------------------------------------------------------------- the admin API

let token = sessionStorage.getItem(TOKEN_KEY);

class ApiFailure extends Error {
  constructor(status, body) {
    super(body && typeof body.message === 'string' ? body.message : `The admin API answered ${status}.`);
    this.status = status;
    this.code = body && body.code;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  } catch {
    throw new ApiFailure(0, { message: 'The gateway does not answer. Is it running?' });
  }
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) {
    const failure = new ApiFailure(res.status, data);
    if (res.status === 401) signOut('The admin token was refused. Sign in again.');
    throw failure;
  }
  return data;
}

// ---------------------------------------------------------------- formatting

const numberFormat = new Intl.NumberFormat();
const fmtNumber = (n) => (n === null || n === undefined ? '–' : numberFormat.format(n));
function fmtTime(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}
function fmtRate(n) {
  return n >= 10 ? n.toFixed(0) : n >= 1 ? n.toFixed(1) : n.toFixed(2);
}
function keyState(key, now = Date.now()) {
  if (key.revokedAt) return 'revoked';
  if (key.expiresAt && Date.parse(key.expiresAt) <= now) return 'expired';
  return 'active';
}
/** A datetime-local value (the operator's time zone) as an RFC 3339 instant, or null when empty. */
function localToIso(value) {
  return value ? new Date(value).toISOString() : null;
}
function isoToLocal(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
function say(message) {
  $('status').textContent = message;
}

// ---------------------------------------------------------------- charts (hand-drawn SVG)

/**
 * Stacked bars: one bar per point, one colour per series (in `series` order). Drawn at the box's
 * own pixel size (so text is never stretched) inside a box of fixed height, so drawing it never
 * moves the page; drawn again when the box changes size (window resize, zoom).
 */
const lastDrawn = new Map();
const resizeWatcher = new ResizeObserver((entries) => {
  for (const entry of entries) {
    const args = lastDrawn.get(entry.target);
    if (args && entry.contentRect.width > 0) drawStackedBars(...args);
  }
});

function drawStackedBars(container, legend, points, series, options) {
  if (!lastDrawn.has(container)) resizeWatcher.observe(container);
  lastDrawn.set(container, [container, legend, points, series, options]);
  const { valueOf, labelOf, unit, colours, empty, integers } = options;
  const width = Math.max(200, Math.round(container.clientWidth));
  const height = Math.max(120, Math.round(container.clientHeight));
  const left = 48;
  const right = 8;
  const bottom = 24;
  const top = 10;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const totals = points.map((p) => series.reduce((sum, s) => sum + valueOf(p, s), 0));
  const { max, step } = niceScale(Math.max(0, ...totals), integers);
  const root = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, 'aria-hidden': 'true', focusable: 'false' });
  for (let v = 0; v <= max + step / 2; v += step) {
    const y = top + plotH - (plotH * v) / max;
    root.append(svg('line', { x1: left, x2: width - right, y1: y, y2: y, class: 'grid' }));
    const label = svg('text', { x: left - 6, y: y + 4, 'text-anchor': 'end' });
    label.textContent = integers ? fmtNumber(Math.round(v)) : fmtRate(v);
    root.append(label);
  }
  const slot = plotW / Math.max(points.length, 1);
  const barW = Math.max(1, slot * 0.8);
  points.forEach((point, i) => {
    let y = top + plotH;
    series.forEach((s, j) => {
      const value = valueOf(point, s);
      if (value <= 0) return;
      const h = (value / max) * plotH;
      y -= h;
      const rect = svg('rect', { x: left + i * slot + (slot - barW) / 2, y, width: barW, height: h, fill: colours[j] });
      const title = svg('title');
      title.textContent = `${labelOf(point)} · ${s}: ${fmtRate(value)} ${unit}`;
      rect.append(title);
      root.append(rect);
    });
  });
  const ticks = [0, Math.floor(points.length / 2), points.length - 1];
  for (const i of ticks) {
    if (!points[i]) continue;
    const label = svg('text', { x: left + i * slot + slot / 2, y: height - 6, 'text-anchor': i === 0 ? 'start' : i === points.length - 1 ? 'end' : 'middle' });
    label.textContent = labelOf(points[i]);
    root.append(label);
  }
  if (totals.every((t) => t === 0)) {
    const note = svg('text', { x: left + plotW / 2, y: top + plotH / 2, 'text-anchor': 'middle', class: 'empty' });
    note.textContent = empty;
    root.append(note);
  }
  container.replaceChildren(root);
  legend.replaceChildren(...series.map((s, j) => el('li', { class: `swatch-${PALETTE.indexOf(colours[j])}`, text: s })));
}
const PALETTE = ['#1a7f37', '#0a58ca', '#bf8700', '#b42318', '#8250df', '#57606a', '#0e7490'];
/** A top of scale and a tick step of 1, 2 or 5 × 10^n, about four ticks; whole steps for counts. */
function niceScale(value, integers) {
  if (value <= 0) return { max: integers ? 4 : 1, step: integers ? 1 : 0.25 };
  const raw = value / 4;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  let step = [1, 2, 5, 10].map((m) => m * magnitude).find((candidate) => candidate >= raw);
  if (integers) step = Math.max(1, Math.round(step));
  return { max: Math.ceil(value / step) * step, step };
}

// ---------------------------------------------------------------- sections and routing

const SECTIONS = ['sign-in', 'overview', 'keys', 'key', 'deprecations', 'audit'];
let refreshTimer = null;
let currentRoute = null;

function show(section) {
  for (const id of SECTIONS) $(id).hidden = id !== section;
  const navSection = section === 'key' ? 'keys' : section;
  for (const link of document.querySelectorAll('nav a')) {
    if (link.dataset.section === navSection) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

function parseRoute() {
  const hash = location.hash.replace(/^#\/?/, '');
  const [section, id] = hash.split('/');
  if (section === 'keys' && id) return { section: 'key', id: decodeURIComponent(id) };
  if (['overview', 'keys', 'deprecations', 'audit'].includes(section)) return { section };
  return { section: 'overview' };
}

async function route() {
  stopRefresh();
  if (!token) {
    $('nav').hidden = true;
    $('sign-out').hidden = true;
    show('sign-in');
    $('token').focus();
    return;
  }
  $('nav').hidden = false;
  $('sign-out').hidden = false;
  currentRoute = parseRoute();
  show(currentRoute.section);
  const loaders = { overview: loadOverview, keys: loadKeys, key: () => loadKey(currentRoute.id), deprecations: loadDeprecations, audit: loadAudit };
  await runLoader(loaders[currentRoute.section]);
  if (currentRoute.section === 'overview' || currentRoute.section === 'key') scheduleRefresh();
}

async function runLoader(loader) {
  try {
    await loader();
  } catch (err) {
    if (err instanceof ApiFailure && err.status === 401) return;
    say(err.message);
  }
}

/** Live sections refresh every few seconds, and not at all while the tab is hidden. */
function scheduleRefresh() {
  stopRefresh();
  if (document.hidden) return;
  refreshTimer = setTimeout(async () => {
    const section = currentRoute && currentRoute.section;
    if (section === 'overview') await runLoader(loadOverview);
    else if (section === 'key') await runLoader(() => loadKeyLive(currentRoute.id));
    else return;
    scheduleRefresh();
  }, REFRESH_MS);
}
function stopRefresh() {
  if (refreshTimer) clearTimeout(refreshTimer);
  refreshTimer = null;
}
document.addEventListener('visibilitychange', () => {
  if (document.hidden) {
    stopRefresh();
    say('Paused while the tab is hidden.');
  } else if (token) {
    say('');
    route();
  }
});

function signOut(message) {
  token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  stopRefresh();
  $('sign-in-error').textContent = message || '';
  say('');
  route();
}

// ---------------------------------------------------------------- sign-in

$('sign-in-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const candidate = $('token').value.trim();
  const button = event.submitter || $('sign-in-form').querySelector('button');
  button.disabled = true;
  $('sign-in-error').textContent = '';
  try {
    const res = await fetch('/admin/stats', { headers: { Authorization: `Bearer ${candidate}` }, cache: 'no-store' });
    if (res.status === 401) {
      $('sign-in-error').textContent = 'That admin token is not valid.';
      return;
    }
    if (res.status === 429) {
      $('sign-in-error').textContent = `Too many wrong tokens from this address. Try again in ${res.headers.get('Retry-After') || 'a few'} seconds.`;
      return;
    }
    if (!res.ok) {
      $('sign-in-error').textContent = `The admin API answered ${res.status}.`;
      return;
    }
    token = candidate;
    sessionStorage.setItem(TOKEN_KEY, token);
    $('token').value = '';
    if (!location.hash || location.hash === '#/') location.hash = '#/overview';
    else route();
  } catch {
    $('sign-in-error').textContent = 'The gateway does not answer. Is it running?';
  } finally {
    button.disabled = false;
  }
});
$('sign-out').addEventListener('click', () => signOut('Signed out.'));

// ---------------------------------------------------------------- overview

async function loadOverview() {
  const stats = await api('GET', '/admin/stats');
  $('total-requests').textContent = fmtNumber(stats.totals.requests);
  $('total-rejections').textContent = fmtNumber(stats.totals.byStatus['429'] || 0);
  $('active-bans').textContent = stats.activeBans === null ? 'unknown' : fmtNumber(stats.activeBans);
  for (const name of ['store', 'upstream']) {
    const value = stats.health[name] || 'unknown';
    const node = $(`health-${name}`);
    node.textContent = value === 'ok' ? 'OK' : value;
    node.className = `card-value health ${value}`;
  }
  const step = stats.stepSeconds;
  const timeOf = (p) => new Date(p.start).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  const statuses = orderedKeys(stats.totals.byStatus, STATUS_ORDER);
  drawStackedBars($('chart-status'), $('legend-status'), stats.points, statuses, {
    valueOf: (p, s) => (p.byStatus[s] || 0) / step,
    labelOf: timeOf,
    unit: 'req/s',
    colours: statuses.map((s) => ({ '2xx': PALETTE[0], '3xx': PALETTE[6], '4xx': PALETTE[2], '429': PALETTE[3], '5xx': PALETTE[4] })[s] || PALETTE[5]),
    empty: 'No requests in the last 15 minutes',
  });
  const plans = orderedKeys(stats.totals.byPlan, [...KNOWN_PLANS, 'anonymous']);
  const planColours = [PALETTE[1], PALETTE[2], PALETTE[4], PALETTE[6], PALETTE[5], PALETTE[0], PALETTE[3]];
  drawStackedBars($('chart-plan'), $('legend-plan'), stats.points, plans, {
    valueOf: (p, s) => (p.byPlan[s] || 0) / step,
    labelOf: timeOf,
    unit: 'req/s',
    colours: plans.map((_, i) => planColours[i % planColours.length]),
    empty: 'No requests in the last 15 minutes',
  });
  const windows = orderedKeys(stats.totals.rejectionsByWindow, ['minute', 'day', 'ban', 'anonymous'], true);
  $('rejections-body').replaceChildren(
    ...windows.map((w) => el('tr', {}, el('td', { text: w }), el('td', { class: 'num', text: fmtNumber(stats.totals.rejectionsByWindow[w] || 0) }))),
  );
  $('overview-updated').textContent = `Last 15 minutes · updated ${new Date(stats.generatedAt).toLocaleTimeString()} · refreshed every ${REFRESH_MS / 1000} s while this tab is visible`;
}

/** Known names first in their order, then any others; with `all`, every known name even at zero. */
function orderedKeys(counts, known, all = false) {
  const present = Object.keys(counts);
  const first = known.filter((k) => all || present.includes(k));
  return first.concat(present.filter((k) => !known.includes(k)).sort());
}

// ---------------------------------------------------------------- keys

let allKeys = [];

function fillPlanSelects(extraPlans = []) {
  const plans = [...new Set([...KNOWN_PLANS, ...extraPlans])];
  for (const select of document.querySelectorAll('.plan-select')) {
    const chosen = select.value;
    const options = plans.map((p) => el('option', { value: p, text: p }));
    if (select.dataset.any) options.unshift(el('option', { value: '', text: select.dataset.any }));
    select.replaceChildren(...options);
    if (chosen) select.value = chosen;
  }
}

async function loadKeys() {
  allKeys = await api('GET', '/admin/keys');
  fillPlanSelects(allKeys.map((k) => k.plan));
  renderKeys();
}

function renderKeys() {
  const query = $('key-search').value.trim().toLowerCase();
  const plan = $('key-plan-filter').value;
  const state = $('key-state-filter').value;
  const now = Date.now();
  const shown = allKeys
    .filter((k) => !query || k.name.toLowerCase().includes(query) || k.id.toLowerCase().includes(query))
    .filter((k) => !plan || k.plan === plan)
    .filter((k) => !state || keyState(k, now) === state)
    .sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1));
  if (shown.length === 0) {
    $('keys-body').replaceChildren(el('tr', {}, el('td', { colspan: 7, class: 'muted', text: allKeys.length ? 'No key matches.' : 'No keys yet.' })));
    return;
  }
  $('keys-body').replaceChildren(
    ...shown.map((k) => {
      const s = keyState(k, now);
      return el(
        'tr',
        {},
        el('td', {}, el('a', { href: `#/keys/${encodeURIComponent(k.id)}`, text: k.name || '(no name)' })),
        el('td', { class: 'mono', text: k.id }),
        el('td', { text: k.plan }),
        el('td', {}, el('span', { class: `badge ${s}`, text: s })),
        el('td', { text: fmtTime(k.createdAt) }),
        el('td', { text: k.expiresAt ? fmtTime(k.expiresAt) : 'never' }),
        el('td', { text: k.lastUsedAt ? fmtTime(k.lastUsedAt) : 'never' }),
      );
    }),
  );
}
for (const id of ['key-search', 'key-plan-filter', 'key-state-filter']) $(id).addEventListener('input', renderKeys);
$('key-filter').addEventListener('submit', (event) => event.preventDefault());

$('new-key').addEventListener('click', () => {
  $('create-form').hidden = false;
  $('create-error').textContent = '';
  $('create-name').focus();
});
$('create-cancel').addEventListener('click', () => {
  $('create-form').reset();
  $('create-form').hidden = true;
  $('new-key').focus();
});

function limitsFrom(perMinute, perDay) {
  if (!perMinute && !perDay) return undefined;
  return { perMinute: Number(perMinute), perDay: Number(perDay) };
}

$('create-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  $('create-error').textContent = '';
  const body = { name: $('create-name').value.trim(), plan: $('create-plan').value };
  const limits = limitsFrom($('create-per-minute').value, $('create-per-day').value);
  if (limits) body.limits = limits;
  const expiresAt = localToIso($('create-expires').value);
  if (expiresAt) body.expiresAt = expiresAt;
  try {
    const created = await api('POST', '/admin/keys', body);
    $('create-form').reset();
    $('create-form').hidden = true;
    showSecret(`New key “${created.name}” (${created.id})`, created.key);
    await loadKeys();
  } catch (err) {
    $('create-error').textContent = err.message;
  }
});

/** The one time a key is visible: a read-only field, a copy button, and a warning. */
function showSecret(title, key) {
  $('secret-title').textContent = title;
  $('secret-value').value = key;
  $('secret-note').textContent = '';
  $('secret-panel').hidden = false;
  $('secret-value').focus();
  $('secret-value').select();
}
$('secret-copy').addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText($('secret-value').value);
    $('secret-note').textContent = 'Copied to the clipboard.';
  } catch {
    $('secret-value').select();
    $('secret-note').textContent = 'The browser refused the clipboard: the key is selected, press Ctrl+C.';
  }
});
$('secret-done').addEventListener('click', () => {
  $('secret-value').value = '';
  $('secret-panel').hidden = true;
  $('new-key').focus();
});

// ---------------------------------------------------------------- one key

let shownKey = null;

async function loadKey(id) {
  fillPlanSelects();
  const [key, usage] = await Promise.all([api('GET', `/admin/keys/${encodeURIComponent(id)}`), api('GET', `/admin/keys/${encodeURIComponent(id)}/usage?days=30`)]);
  shownKey = key;
  renderKey(key);
  renderUsage(usage);
  fillEditForm(key);
}

/** The refresh: windows, ban and facts, without touching a form the operator may be typing in. */
async function loadKeyLive(id) {
  const [key, usage] = await Promise.all([api('GET', `/admin/keys/${encodeURIComponent(id)}`), api('GET', `/admin/keys/${encodeURIComponent(id)}/usage?days=30`)]);
  shownKey = key;
  renderKey(key);
  renderUsage(usage);
}

function renderKey(key) {
  const state = keyState(key);
  const banned = key.bannedUntil && Date.parse(key.bannedUntil) > Date.now();
  $('key-title').textContent = key.name || '(no name)';
  $('key-state').textContent = banned && state === 'active' ? 'banned' : state;
  $('key-state').className = `badge ${banned && state === 'active' ? 'banned' : state}`;
  const facts = [
    ['Id', key.id],
    ['Plan', key.plan],
    ['Limits', key.limits ? `${fmtNumber(key.limits.perMinute)}/min · ${fmtNumber(key.limits.perDay)}/day` : '–'],
    ['Created', fmtTime(key.createdAt)],
    ['Expires', key.expiresAt ? fmtTime(key.expiresAt) : 'never'],
    ['Last used', key.lastUsedAt ? fmtTime(key.lastUsedAt) : 'never'],
    ['Banned until', key.bannedUntil ? fmtTime(key.bannedUntil) : 'not banned'],
    ['Previous secret works until', key.previousKeyExpiresAt && !key.revokedAt ? fmtTime(key.previousKeyExpiresAt) : '–'],
    ['Revoked', key.revokedAt ? fmtTime(key.revokedAt) : '–'],
  ];
  $('key-facts').replaceChildren(...facts.map(([name, value]) => el('div', {}, el('dt', { text: name }), el('dd', { text: value }))));
  for (const name of ['minute', 'day']) {
    const w = key.usage && key.usage[name];
    const meter = $(`window-${name}`);
    if (!w) continue;
    const used = w.limit - w.remaining;
    meter.max = w.limit;
    meter.value = used;
    meter.high = w.limit * 0.8;
    $(`window-${name}-text`).textContent = `${fmtNumber(used)} of ${fmtNumber(w.limit)} used · resets ${new Date(w.reset * 1000).toLocaleTimeString()}`;
  }
  const revoked = Boolean(key.revokedAt);
  $('unban').disabled = !banned;
  $('revoke').disabled = revoked;
  // A revoked key is final: nothing to change, rotate or lift.
  $('key-actions').hidden = revoked;
  $('key-revoked-note').hidden = !revoked;
}

const USAGE_SERIES = { admitted: 'admitted', 'rate limited': 'rateLimited', banned: 'banned' };
function renderUsage(usage) {
  drawStackedBars($('chart-usage'), $('legend-usage'), usage.days, Object.keys(USAGE_SERIES), {
    valueOf: (d, s) => d[USAGE_SERIES[s]] || 0,
    labelOf: (d) => d.date,
    unit: 'requests',
    colours: [PALETTE[1], PALETTE[3], PALETTE[4]],
    empty: 'No requests in the last 30 days',
    integers: true,
  });
  const total = usage.days.reduce((sum, d) => sum + d.admitted, 0);
  $('chart-usage').setAttribute('aria-label', `Requests per day over the last ${usage.days.length} days: ${total} admitted in all`);
}

/** The limit fields as the form was filled: a save sends limits only when the operator changed them. */
let limitsAsFilled = '';

function limitFields() {
  return { perMinute: $('edit-per-minute').value.trim(), perDay: $('edit-per-day').value.trim() };
}

function fillEditForm(key) {
  $('edit-name').value = key.name;
  $('edit-plan').value = key.plan;
  // The limits the key is held to now: the admin API does not say whether they are the plan's or an
  // override, so the form shows them either way, and saving a new name or expiry leaves them alone.
  $('edit-per-minute').value = key.limits ? key.limits.perMinute : '';
  $('edit-per-day').value = key.limits ? key.limits.perDay : '';
  limitsAsFilled = JSON.stringify(limitFields());
  $('edit-expires').value = isoToLocal(key.expiresAt);
  $('edit-error').textContent = '';
  $('action-error').textContent = '';
}

$('edit-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  say('');
  $('edit-error').textContent = '';
  const fields = limitFields();
  if (Boolean(fields.perMinute) !== Boolean(fields.perDay)) {
    $('edit-error').textContent = 'Give both limits (per minute and per day), or empty both to use the plan\'s limits.';
    return;
  }
  const body = {
    name: $('edit-name').value.trim(),
    plan: $('edit-plan').value,
    expiresAt: localToIso($('edit-expires').value),
  };
  if (JSON.stringify(fields) !== limitsAsFilled) body.limits = limitsFrom(fields.perMinute, fields.perDay) ?? null;
  try {
    await api('PATCH', `/admin/keys/${encodeURIComponent(shownKey.id)}`, body);
    say(`Saved the changes to “${body.name}”.`);
    await loadKey(shownKey.id);
  } catch (err) {
    $('edit-error').textContent = err.message;
  }
});

$('rotate-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  say('');
  $('action-error').textContent = '';
  try {
    const rotated = await api('POST', `/admin/keys/${encodeURIComponent(shownKey.id)}/rotate`, { graceSeconds: Number($('rotate-grace').value) });
    await loadKey(shownKey.id);
    showSecret(`New secret for “${rotated.name}”: the old one works until ${fmtTime(rotated.previousKeyExpiresAt)}`, rotated.key);
    // The secret panel lives in the keys section; show it here too by moving it above the facts.
    $('key-facts').before($('secret-panel'));
    $('secret-value').focus();
  } catch (err) {
    $('action-error').textContent = err.message;
  }
});

$('unban').addEventListener('click', async () => {
  $('action-error').textContent = '';
  try {
    await api('DELETE', `/admin/keys/${encodeURIComponent(shownKey.id)}/ban`);
    say(`Lifted the ban on “${shownKey.name}”.`);
    await loadKeyLive(shownKey.id);
  } catch (err) {
    $('action-error').textContent = err.message;
  }
});

$('revoke').addEventListener('click', () => {
  say('');
  $('revoke-text').textContent = `Revoke “${shownKey.name}” (${shownKey.id})? Every request with this key, and with a previous secret still in its grace period, will get 401 from then on. This cannot be undone.`;
  $('revoke-confirm').textContent = `Revoke “${shownKey.name}”`;
  $('revoke-dialog').showModal();
});
$('revoke-dialog').addEventListener('close', async () => {
  if ($('revoke-dialog').returnValue !== 'revoke') return;
  $('revoke-dialog').returnValue = '';
  try {
    await api('DELETE', `/admin/keys/${encodeURIComponent(shownKey.id)}`);
    say(`Revoked “${shownKey.name}”.`);
    await loadKey(shownKey.id);
  } catch (err) {
    $('action-error').textContent = err.message;
  }
  $('revoke').focus();
});

// ---------------------------------------------------------------- deprecations and audit

async function loadDeprecations() {
  const report = await api('GET', '/admin/deprecations');
  $('deprecations-note').textContent = `Keys that called each deprecated operation in the last ${report.lookbackDays} days.`;
  if (report.routes.length === 0) {
    $('deprecations-body').replaceChildren(el('p', { class: 'muted', text: 'No operation is deprecated.' }));
    return;
  }
  const now = Date.now();
  $('deprecations-body').replaceChildren(
    ...report.routes.map((r) => {
      const daysLeft = Math.ceil((Date.parse(r.sunset) - now) / 86_400_000);
      const head = el(
        'h3',
        {},
        el('code', { text: `${r.method} ${r.route}` }),
        el('span', { class: 'muted', text: daysLeft > 0 ? ` · sunset ${fmtTime(r.sunset)}, ${fmtNumber(daysLeft)} days left` : ` · past its sunset (${fmtTime(r.sunset)})` }),
      );
      const rows = r.callers.length
        ? r.callers.map((c) =>
            el(
              'tr',
              {},
              el('td', {}, el('a', { href: `#/keys/${encodeURIComponent(c.keyId)}`, text: c.name || c.keyId })),
              el('td', { text: c.plan || '–' }),
              el('td', { class: 'num', text: fmtNumber(c.count) }),
              el('td', { text: fmtTime(c.lastCallAt) }),
            ),
          )
        : [el('tr', {}, el('td', { colspan: 4, class: 'muted', text: 'No key called it.' }))];
      const table = el(
        'table',
        {},
        el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'Key' }), el('th', { scope: 'col', text: 'Plan' }), el('th', { scope: 'col', class: 'num', text: 'Calls' }), el('th', { scope: 'col', text: 'Last call' }))),
        el('tbody', {}, ...rows),
      );
      return el('div', { class: 'panel' }, head, table);
    }),
  );
}

/** {plan: "pro", limits: {perMinute: 300, …}} → "plan: pro · limits: 300/min, 10,000/day". */
function describeDetails(details) {
  const entries = Object.entries(details || {});
  if (entries.length === 0) return '–';
  const value = (name, v) => {
    if (v === null) return 'none';
    if (name === 'limits' && typeof v === 'object') return `${fmtNumber(v.perMinute)}/min, ${fmtNumber(v.perDay)}/day`;
    if (typeof v === 'string' && /^\d{4}-\d\d-\d\dT/.test(v)) return fmtTime(v);
    return typeof v === 'object' ? JSON.stringify(v) : String(v);
  };
  return entries.map(([name, v]) => `${name}: ${value(name, v)}`).join(' · ');
}

async function loadAudit() {
  const [{ entries }, keys] = await Promise.all([api('GET', '/admin/audit?limit=100'), api('GET', '/admin/keys')]);
  const nameOf = new Map(keys.map((k) => [k.id, k.name]));
  if (entries.length === 0) {
    $('audit-body').replaceChildren(el('tr', {}, el('td', { colspan: 4, class: 'muted', text: 'No admin writes yet.' })));
    return;
  }
  $('audit-body').replaceChildren(
    ...entries.map((e) =>
      el(
        'tr',
        {},
        el('td', { class: 'when', text: new Date(e.at).toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' }) }),
        el('td', { text: e.action }),
        el(
          'td',
          {},
          el('a', { href: `#/keys/${encodeURIComponent(e.keyId)}`, text: nameOf.get(e.keyId) || e.keyId }),
          el('br'),
          el('span', { class: 'mono muted', text: e.keyId }),
        ),
        el('td', { text: describeDetails(e.details) }),
      ),
    ),
  );
}

// ---------------------------------------------------------------- start

window.addEventListener('hashchange', () => {
  // The one-time secret never survives leaving the page it was shown on.
  $('secret-value').value = '';
  $('secret-panel').hidden = true;
  $('keys').querySelector('#key-list').before($('secret-panel'));
  say('');
  route();
});
fillPlanSelects();
route();
