// @ts-check
// The config in force (GET /admin/config): its hash and the last reload, one line on the overview.

import { getConfig } from './api.js';

/** @typedef {import('./types.js').ConfigView} ConfigView */

/** "Config 3f2a9c1d04e7 · reloaded 14:02:11 (SIGHUP)", or "· last reload refused …", or "· not reloaded since start". */
export function describeConfig(/** @type {ConfigView} */ view) {
  const last = view.lastReload;
  const when = last ? new Date(last.at).toLocaleTimeString() : '';
  const reload = !last
    ? 'not reloaded since start'
    : last.result === 'success'
      ? `reloaded ${when} (${last.trigger})`
      : `last reload refused ${when} (${last.trigger}): the config in force is unchanged`;
  return `Config ${view.hash.slice(0, 12)} · ${reload}`;
}

export async function loadConfigStatus(/** @type {HTMLElement} */ node) {
  const view = await getConfig();
  node.textContent = describeConfig(view);
  node.title = `sha256 ${view.hash}`;
  node.className = view.lastReload?.result === 'failure' ? 'muted config-status refused' : 'muted config-status';
}
