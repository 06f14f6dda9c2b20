// @ts-check
// The one time a key is visible (after create and after rotate): a read-only field, a copy button
// and a warning. It never survives leaving the page it was shown on.

import { byId } from './dom.js';

const ui = {
  panel: byId('secret-panel', HTMLElement),
  title: byId('secret-title', HTMLElement),
  value: byId('secret-value', HTMLInputElement),
  note: byId('secret-note', HTMLElement),
  copy: byId('secret-copy', HTMLButtonElement),
  done: byId('secret-done', HTMLButtonElement),
  keyList: byId('key-list', HTMLElement),
  newKey: byId('new-key', HTMLButtonElement),
};

/**
 * Shows a new secret under this title; `before`, when given, is where the panel moves to (the key
 * page shows it above the key's facts; its home is above the key list).
 * @param {string} title
 * @param {string} key
 * @param {Element} [before]
 */
export function showSecret(title, key, before) {
  if (before) before.before(ui.panel);
  ui.title.textContent = title;
  ui.value.value = key;
  ui.note.textContent = '';
  ui.panel.hidden = false;
  ui.value.focus();
  ui.value.select();
}

/** Clears the secret and puts the panel back in its home, hidden. */
export function hideSecret() {
  ui.value.value = '';
  ui.panel.hidden = true;
  ui.keyList.before(ui.panel);
}

export function setUpSecretPanel() {
  ui.copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(ui.value.value);
      ui.note.textContent = 'Copied to the clipboard.';
    } catch {
      ui.value.select();
      ui.note.textContent = 'The browser refused the clipboard: the key is selected, press Ctrl+C.';
    }
  });
  ui.done.addEventListener('click', () => {
    ui.value.value = '';
    ui.panel.hidden = true;
    ui.newKey.focus();
  });
}
