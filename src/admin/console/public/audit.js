// @ts-check
// Audit log: the latest admin writes, newest first, each key by name where it is still known.

import { getAudit, listKeys } from './api.js';
import { byId, el } from './dom.js';
import { describeDetails } from './format.js';
import { keyHref } from './routes.js';

/** @typedef {import('./types.js').AuditEntry} AuditEntry */

const body = byId('audit-body', HTMLElement);

export async function loadAudit() {
  const [{ entries }, keys] = await Promise.all([getAudit(100), listKeys()]);
  const nameOf = new Map(keys.map((k) => [k.id, k.name]));
  if (entries.length === 0) {
    body.replaceChildren(el('tr', {}, el('td', { colspan: 4, class: 'muted', text: 'No admin writes yet.' })));
    return;
  }
  body.replaceChildren(...entries.map((e) => entryRow(e, nameOf.get(e.keyId))));
}

/**
 * @param {AuditEntry} e
 * @param {string | undefined} name
 */
function entryRow(e, name) {
  const when = new Date(e.at).toLocaleString(undefined, {
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
  return el(
    'tr',
    {},
    el('td', { class: 'when', text: when }),
    el('td', { text: e.action }),
    el(
      'td',
      {},
      el('a', { href: keyHref(e.keyId), text: name || e.keyId }),
      el('br'),
      el('span', { class: 'mono muted', text: e.keyId }),
    ),
    el('td', { text: describeDetails(e.details) }),
  );
}
