// @ts-check
// The admin API client: every call the console makes, on this origin, with the admin token as a
// bearer token. The token lives in this module and in this tab's sessionStorage (gone when the tab
// closes); no cookie is set, so no other site can make the browser act for the operator.

/** @typedef {import('./types.js').ConfigView} ConfigView */
/** @typedef {import('./types.js').Consumer} Consumer */
/** @typedef {import('./types.js').ConsumerDetail} ConsumerDetail */
/** @typedef {import('./types.js').NewConsumer} NewConsumer */
/** @typedef {import('./types.js').AuditTrail} AuditTrail */
/** @typedef {import('./types.js').CreatedKey} CreatedKey */
/** @typedef {import('./types.js').DeprecationReport} DeprecationReport */
/** @typedef {import('./types.js').Key} Key */
/** @typedef {import('./types.js').KeyChange} KeyChange */
/** @typedef {import('./types.js').KeyDetail} KeyDetail */
/** @typedef {import('./types.js').KeyUsage} KeyUsage */
/** @typedef {import('./types.js').NewKey} NewKey */
/** @typedef {import('./types.js').PlanList} PlanList */
/** @typedef {import('./types.js').RotatedKey} RotatedKey */
/** @typedef {import('./types.js').StatsReport} StatsReport */
/** @typedef {import('./types.js').TopKeys} TopKeys */
/** @typedef {import('./types.js').WindowsReset} WindowsReset */

const TOKEN_KEY = 'asg-admin-token';

/** @type {string | null} */
let token = sessionStorage.getItem(TOKEN_KEY);

/** An answer other than 2xx, or no answer at all (status 0), with the API's message. */
export class ApiFailure extends Error {
  /**
   * @param {number} status
   * @param {unknown} body the Error body `{code, message, status}`, when there is one
   */
  constructor(status, body) {
    const error = /** @type {{ code?: unknown, message?: unknown } | null} */ (typeof body === 'object' ? body : null);
    super(typeof error?.message === 'string' ? error.message : `The admin API answered ${status}.`);
    this.status = status;
    this.code = typeof error?.code === 'string' ? error.code : null;
  }
}

/** @type {(message: string) => void} */
let tokenRefused = () => {};

/** What to do when the API refuses the token in use (it was changed, or the tab outlived it). */
export function onTokenRefused(/** @type {(message: string) => void} */ handler) {
  tokenRefused = handler;
}

export function signedIn() {
  return token !== null;
}

/** Forgets the token, here and in sessionStorage. */
export function forgetToken() {
  token = null;
  sessionStorage.removeItem(TOKEN_KEY);
}

/**
 * Tries a token against the admin API; keeps it only when it is accepted.
 * @param {string} candidate
 * @returns {Promise<{ ok: true } | { ok: false, problem: string }>}
 */
export async function signIn(candidate) {
  let res;
  try {
    res = await fetch('/admin/plans', { headers: { Authorization: `Bearer ${candidate}` }, cache: 'no-store' });
  } catch {
    return { ok: false, problem: 'The gateway does not answer. Is it running?' };
  }
  if (res.status === 401) return { ok: false, problem: 'That admin token is not valid.' };
  if (res.status === 429) {
    return {
      ok: false,
      problem: `Too many wrong tokens from this address. Try again in ${res.headers.get('Retry-After') || 'a few'} seconds.`,
    };
  }
  if (!res.ok) return { ok: false, problem: `The admin API answered ${res.status}.` };
  token = candidate;
  sessionStorage.setItem(TOKEN_KEY, candidate);
  return { ok: true };
}

/**
 * One call with the token; the parsed JSON answer, null for 204. A refused token signs out.
 * @template R
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<R>}
 */
async function call(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
    });
  } catch {
    throw new ApiFailure(0, { message: 'The gateway does not answer. Is it running?' });
  }
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) {
    const failure = new ApiFailure(res.status, data);
    if (res.status === 401) tokenRefused('The admin token was refused. Sign in again.');
    throw failure;
  }
  return data;
}

const keyPath = (/** @type {string} */ id) => `/admin/keys/${encodeURIComponent(id)}`;

/** @returns {Promise<PlanList>} */
export const getPlans = () => call('GET', '/admin/plans');
/** @returns {Promise<StatsReport>} */
export const getStats = () => call('GET', '/admin/stats');
/** @returns {Promise<TopKeys>} */
export const getTopKeys = (minutes = 5, limit = 10) =>
  call('GET', `/admin/stats/top-keys?minutes=${minutes}&limit=${limit}`);
/** @returns {Promise<ConfigView>} */
export const getConfig = () => call('GET', '/admin/config');
/** @returns {Promise<Key[]>} */
export const listKeys = () => call('GET', '/admin/keys');
/** @returns {Promise<KeyDetail>} */
export const getKey = (/** @type {string} */ id) => call('GET', keyPath(id));
/** @returns {Promise<KeyUsage>} */
export const getKeyUsage = (/** @type {string} */ id, days = 30) => call('GET', `${keyPath(id)}/usage?days=${days}`);
/** @returns {Promise<CreatedKey>} */
export const createKey = (/** @type {NewKey} */ body) => call('POST', '/admin/keys', body);
/** @returns {Promise<Key>} */
export const updateKey = (/** @type {string} */ id, /** @type {KeyChange} */ body) => call('PATCH', keyPath(id), body);
/** @returns {Promise<RotatedKey>} */
export const rotateKey = (/** @type {string} */ id, /** @type {number} */ graceSeconds) =>
  call('POST', `${keyPath(id)}/rotate`, { graceSeconds });
/** @returns {Promise<unknown>} */
export const addCredits = (/** @type {string} */ id, /** @type {number} */ units) =>
  call('POST', `${keyPath(id)}/credits`, { units });
/** @returns {Promise<null>} */
export const revokeKey = (/** @type {string} */ id) => call('DELETE', keyPath(id));
/** @returns {Promise<null>} */
export const liftBan = (/** @type {string} */ id) => call('DELETE', `${keyPath(id)}/ban`);
/** @returns {Promise<WindowsReset>} */
export const resetKeyWindows = (/** @type {string} */ id, /** @type {string[]} */ windows) =>
  call('POST', `${keyPath(id)}/windows/reset`, { windows });
const consumerPath = (/** @type {string} */ id) => `/admin/consumers/${encodeURIComponent(id)}`;
/** @returns {Promise<WindowsReset>} */
export const resetConsumerWindows = (/** @type {string} */ id, /** @type {string[]} */ windows) =>
  call('POST', `${consumerPath(id)}/windows/reset`, { windows });
/** @returns {Promise<Consumer[]>} */
export const listConsumers = () => call('GET', '/admin/consumers');
/** @returns {Promise<ConsumerDetail>} */
export const getConsumer = (/** @type {string} */ id) => call('GET', consumerPath(id));
/** @returns {Promise<Consumer>} */
export const createConsumer = (/** @type {NewConsumer} */ body) => call('POST', '/admin/consumers', body);
/** @returns {Promise<Consumer>} */
export const updateConsumer = (/** @type {string} */ id, /** @type {Partial<NewConsumer>} */ body) =>
  call('PATCH', consumerPath(id), body);
/** @returns {Promise<null>} */
export const deleteConsumer = (/** @type {string} */ id) => call('DELETE', consumerPath(id));

/** @returns {Promise<AuditTrail>} */
export const getAudit = (limit = 100) => call('GET', `/admin/audit?limit=${limit}`);
/** @returns {Promise<DeprecationReport>} */
export const getDeprecations = () => call('GET', '/admin/deprecations');
