// @ts-check
// Pure helpers: numbers, times, a key's state, chart scales and audit details as the page shows
// them. Nothing here touches the page, so test/unit/admin/console runs them under Node.

/** @typedef {import('./types.js').Key} Key */
/** @typedef {import('./types.js').Limits} Limits */

const numberFormat = new Intl.NumberFormat();

/** 12345 → "12,345" in the operator's locale; a missing number → "–". */
export function fmtNumber(/** @type {number | null | undefined} */ n) {
  return n === null || n === undefined ? '–' : numberFormat.format(n);
}

/** An instant in the operator's time zone and locale, to the minute; none → "–". */
export function fmtTime(/** @type {string | null | undefined} */ iso) {
  if (!iso) return '–';
  return new Date(iso).toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
  });
}

/** A rate with the digits that matter: 12 → "12", 1.25 → "1.3", 0.125 → "0.13". */
export function fmtRate(/** @type {number} */ n) {
  return n >= 10 ? n.toFixed(0) : n >= 1 ? n.toFixed(1) : n.toFixed(2);
}

/** @typedef {'active' | 'expired' | 'revoked'} KeyState */

/**
 * Revoked before expired before active, as the gateway decides.
 * @param {Pick<Key, 'revokedAt' | 'expiresAt'>} key
 * @param {number} [now]
 * @returns {KeyState}
 */
export function keyState(key, now = Date.now()) {
  if (key.revokedAt) return 'revoked';
  if (key.expiresAt && Date.parse(key.expiresAt) <= now) return 'expired';
  return 'active';
}

/** A datetime-local value (the operator's time zone) as an RFC 3339 instant, or null when empty. */
export function localToIso(/** @type {string} */ value) {
  return value ? new Date(value).toISOString() : null;
}

/** An instant as a datetime-local value in the operator's time zone; none → "". */
export function isoToLocal(/** @type {string | null} */ iso) {
  if (!iso) return '';
  const d = new Date(iso);
  const pad = (/** @type {number} */ n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/**
 * The two limit fields of a form as limits, or undefined when both are empty.
 * @param {string} perMinute
 * @param {string} perDay
 * @returns {Limits | undefined}
 */
export function limitsFrom(perMinute, perDay) {
  if (!perMinute && !perDay) return undefined;
  return { perMinute: Number(perMinute), perDay: Number(perDay) };
}

/**
 * New minute and day limits from the key page's form, keeping what that form does not edit: the
 * key's month quota, its concurrency limit and its hidden windows (a limits write replaces them all).
 * @param {Limits | null | undefined} current
 * @param {Limits | null} next
 * @returns {Limits | null}
 */
export function withKeptLimits(current, next) {
  if (!next || !current) return next;
  const { perMonth, maxInFlight, hiddenWindows } = current;
  return {
    ...next,
    ...(perMonth === undefined ? {} : { perMonth }),
    ...(maxInFlight === undefined ? {} : { maxInFlight }),
    ...(hiddenWindows === undefined ? {} : { hiddenWindows: [...hiddenWindows] }),
  };
}

/**
 * A key's own limits in a line: `60/min · 1,000/day · 5 at once · hidden: minute`.
 * @param {Limits | null} limits
 */
export function keyLimitsText(limits) {
  if (!limits) return '–';
  const parts = [`${fmtNumber(limits.perMinute)}/min`, `${fmtNumber(limits.perDay)}/day`];
  if (limits.perMonth !== undefined) parts.push(`${fmtNumber(limits.perMonth)}/month`);
  if (limits.maxInFlight !== undefined) parts.push(`${fmtNumber(limits.maxInFlight)} at once`);
  if (limits.hiddenWindows !== undefined)
    parts.push(`hidden: ${limits.hiddenWindows.length > 0 ? limits.hiddenWindows.join(', ') : 'none'}`);
  return parts.join(' · ');
}

/**
 * A top of scale and a tick step of 1, 2 or 5 × 10^n, about four ticks; whole steps for counts.
 * @param {number} value
 * @param {boolean} [integers]
 * @returns {{ max: number, step: number }}
 */
export function niceScale(value, integers = false) {
  if (value <= 0) return { max: integers ? 4 : 1, step: integers ? 1 : 0.25 };
  const raw = value / 4;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  let step = [1, 2, 5, 10].map((m) => m * magnitude).find((candidate) => candidate >= raw) ?? 10 * magnitude;
  if (integers) step = Math.max(1, Math.round(step));
  return { max: Math.ceil(value / step) * step, step };
}

/**
 * Known names first in their order, then any others sorted; with `all`, every known name even at zero.
 * @param {Record<string, number>} counts
 * @param {readonly string[]} known
 * @param {boolean} [all]
 * @returns {string[]}
 */
export function orderedKeys(counts, known, all = false) {
  const present = Object.keys(counts);
  const first = known.filter((k) => all || present.includes(k));
  return first.concat(present.filter((k) => !known.includes(k)).sort());
}

/**
 * The plan choices: the server's plans in its order, then any other plan a key is on (a plan
 * removed from the config still shows, so its keys can be found and moved).
 * @param {readonly string[]} offered
 * @param {readonly string[]} [onKeys]
 * @returns {string[]}
 */
export function planChoices(offered, onKeys = []) {
  return [...new Set([...offered, ...onKeys])];
}

/** Whole days from `now` until `iso` (rounded up; zero or less once it has passed). */
export function daysUntil(/** @type {string} */ iso, now = Date.now()) {
  return Math.ceil((Date.parse(iso) - now) / 86_400_000);
}

/**
 * An audit entry's details in a line: {plan: "pro", limits: {perMinute: 300, …}} →
 * "plan: pro · limits: 300/min, 10,000/day".
 * @param {Record<string, unknown> | null | undefined} details
 * @returns {string}
 */
export function describeDetails(details) {
  const entries = Object.entries(details ?? {});
  if (entries.length === 0) return '–';
  return entries.map(([name, v]) => `${name}: ${detailValue(name, v)}`).join(' · ');
}

/** One detail's value: limits as rates, instants as local times, null as "none". */
function detailValue(/** @type {string} */ name, /** @type {unknown} */ v) {
  if (v === null) return 'none';
  if (name === 'limits' && isLimits(v)) return `${fmtNumber(v.perMinute)}/min, ${fmtNumber(v.perDay)}/day`;
  if (typeof v === 'string' && /^\d{4}-\d\d-\d\dT/.test(v)) return fmtTime(v);
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

/** @returns {v is Limits} */
function isLimits(/** @type {unknown} */ v) {
  return typeof v === 'object' && v !== null && typeof (/** @type {Limits} */ (v).perMinute) === 'number';
}

/** What went wrong, in a sentence (an API failure's message is the API's own). */
export function messageOf(/** @type {unknown} */ err) {
  return err instanceof Error ? err.message : String(err);
}
