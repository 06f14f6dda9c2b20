// @ts-check
// The sections the address names: #/overview, #/keys, #/keys/<id>, #/consumers, #/consumers/<id>,
// #/deprecations, #/audit.
// Pure, so test/unit/admin/console checks it under Node.

/**
 * @typedef {{ section: 'overview' | 'keys' | 'consumers' | 'deprecations' | 'audit' } | { section: 'key' | 'consumer', id: string }} Route
 * @typedef {Route['section'] | 'sign-in'} Section
 */

/** @type {ReadonlyArray<Exclude<Route['section'], 'key' | 'consumer'>>} */
const LISTED = ['overview', 'keys', 'consumers', 'deprecations', 'audit'];

/**
 * The route of a location hash; anything unknown is the overview.
 * @param {string} hash
 * @returns {Route}
 */
export function parseRoute(hash) {
  const [section, id] = hash.replace(/^#\/?/, '').split('/');
  if (section === 'keys' && id) return { section: 'key', id: decodeURIComponent(id) };
  if (section === 'consumers' && id) return { section: 'consumer', id: decodeURIComponent(id) };
  const listed = LISTED.find((name) => name === section);
  return { section: listed ?? 'overview' };
}

/** The address of one key's page. */
export function keyHref(/** @type {string} */ id) {
  return `#/keys/${encodeURIComponent(id)}`;
}

/** The address of one consumer's page. */
export function consumerHref(/** @type {string} */ id) {
  return `#/consumers/${encodeURIComponent(id)}`;
}
