// @ts-check
// Which section shows: the sign-in without a token, else the one the address names (#/keys, …).
// Live sections (overview, a key's page) refresh every few seconds, never while the tab is hidden.

import { ApiFailure, forgetToken, signedIn } from './api.js';
import { loadAudit } from './audit.js';
import { loadConsumer, loadConsumers } from './consumers.js';
import { loadDeprecations } from './deprecations.js';
import { byId, say } from './dom.js';
import { loadKey, refreshKey } from './key-page.js';
import { loadKeys } from './keys-list.js';
import { loadOverview, REFRESH_MS } from './overview.js';
import { parseRoute } from './routes.js';
import { hideSecret } from './secret.js';
import { showSignIn, tellSignIn } from './sign-in.js';
import { forgetPlans } from './state.js';

/** @typedef {import('./routes.js').Route} Route */
/** @typedef {import('./routes.js').Section} Section */

/** @type {Record<Section, HTMLElement>} */
const sections = {
  'sign-in': byId('sign-in', HTMLElement),
  overview: byId('overview', HTMLElement),
  keys: byId('keys', HTMLElement),
  key: byId('key', HTMLElement),
  consumers: byId('consumers', HTMLElement),
  consumer: byId('consumer', HTMLElement),
  deprecations: byId('deprecations', HTMLElement),
  audit: byId('audit', HTMLElement),
};
const nav = byId('nav', HTMLElement);
const signOutButton = byId('sign-out', HTMLButtonElement);

/** The route on screen, and the timer of its next refresh. */
const shown = {
  /** @type {Route | null} */
  route: null,
  /** @type {ReturnType<typeof setTimeout> | null} */
  refreshTimer: null,
};

function show(/** @type {Section} */ section) {
  for (const [id, node] of Object.entries(sections)) node.hidden = id !== section;
  const navSection = section === 'key' ? 'keys' : section === 'consumer' ? 'consumers' : section;
  for (const link of nav.querySelectorAll('a')) {
    if (link.dataset.section === navSection) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

/** @returns {Promise<void>} */
function load(/** @type {Route} */ route) {
  switch (route.section) {
    case 'overview':
      return loadOverview();
    case 'keys':
      return loadKeys();
    case 'key':
      return loadKey(route.id);
    case 'consumers':
      return loadConsumers();
    case 'consumer':
      return loadConsumer(route.id);
    case 'deprecations':
      return loadDeprecations();
    case 'audit':
      return loadAudit();
  }
}

/** The live sections' refresh; null for the others. */
function refresherOf(/** @type {Route} */ route) {
  if (route.section === 'overview') return loadOverview;
  if (route.section === 'key') return async () => void (await refreshKey(route.id));
  if (route.section === 'consumer') return () => loadConsumer(route.id);
  return null;
}

/** Runs a loader; its failure goes to the status line (a refused token has already signed out). */
async function run(/** @type {() => Promise<void>} */ loader) {
  try {
    await loader();
  } catch (err) {
    if (err instanceof ApiFailure && err.status === 401) return;
    say(err instanceof Error ? err.message : String(err));
  }
}

/** Shows the section the address names, or the sign-in. */
export async function route() {
  stopRefresh();
  nav.hidden = !signedIn();
  signOutButton.hidden = !signedIn();
  if (!signedIn()) {
    show('sign-in');
    showSignIn();
    return;
  }
  const current = parseRoute(location.hash);
  shown.route = current;
  show(current.section);
  await run(() => load(current));
  if (refresherOf(current)) scheduleRefresh();
}

function scheduleRefresh() {
  stopRefresh();
  if (document.hidden) return;
  shown.refreshTimer = setTimeout(async () => {
    const refresh = shown.route && refresherOf(shown.route);
    if (!refresh) return;
    await run(refresh);
    scheduleRefresh();
  }, REFRESH_MS);
}

function stopRefresh() {
  if (shown.refreshTimer) clearTimeout(shown.refreshTimer);
  shown.refreshTimer = null;
}

/** Forgets the token and the plans, and goes back to the sign-in saying why. */
export function signOut(/** @type {string} */ message) {
  forgetToken();
  forgetPlans();
  stopRefresh();
  tellSignIn(message);
  say('');
  route();
}

/** Follows the address, the tab's visibility and the sign-out button. */
export function startRouting() {
  window.addEventListener('hashchange', () => {
    // The one-time secret never survives leaving the page it was shown on.
    hideSecret();
    say('');
    route();
  });
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) {
      stopRefresh();
      say('Paused while the tab is hidden.');
    } else if (signedIn()) {
      say('');
      route();
    }
  });
  signOutButton.addEventListener('click', () => signOut('Signed out.'));
  route();
}
