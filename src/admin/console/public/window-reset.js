// @ts-check
// A window reset, from a key's page or a consumer's: a modal dialog names what is reset and asks
// which windows (only those it has, none ticked), and nothing is sent unless the operator confirms.

import { byId, say } from './dom.js';
import { fmtNumber, messageOf } from './format.js';

/** @typedef {import('./types.js').WindowName} WindowName */
/** @typedef {import('./types.js').WindowsReset} WindowsReset */

/** @type {WindowName[]} */
const WINDOWS = ['minute', 'day', 'month'];

const ui = {
  dialog: byId('reset-dialog', HTMLDialogElement),
  text: byId('reset-text', HTMLElement),
  confirm: byId('reset-confirm', HTMLButtonElement),
  boxes: {
    minute: byId('reset-minute', HTMLInputElement),
    day: byId('reset-day', HTMLInputElement),
    month: byId('reset-month', HTMLInputElement),
  },
  rows: {
    minute: byId('reset-minute-row', HTMLElement),
    day: byId('reset-day-row', HTMLElement),
    month: byId('reset-month-row', HTMLElement),
  },
};

/**
 * What the open dialog resets, once confirmed.
 * @typedef {{ what: string, windows: WindowName[], errorLine: HTMLElement, send: (windows: WindowName[]) => Promise<WindowsReset>, after: () => Promise<unknown> }} ResetAsk
 */
/** @type {ResetAsk | null} */
let asked = null;

function ticked() {
  return WINDOWS.filter((w) => !ui.rows[w].hidden && ui.boxes[w].checked);
}

/** "minute held 3 of 3, day held 40 of 1,000": what the answer says each window held. */
function heldText(/** @type {WindowsReset} */ answer) {
  return WINDOWS.flatMap((w) => {
    const held = answer.reset[w];
    return held ? [`${w} held ${fmtNumber(held.used)} of ${fmtNumber(held.limit)}`] : [];
  }).join(', ');
}

/** Opens the dialog for `ask.what` (“Acme” (con_…)) with its windows to choose from. */
export function askReset(/** @type {ResetAsk} */ ask) {
  asked = ask;
  ask.errorLine.textContent = '';
  say('');
  ui.text.textContent = `Reset windows of ${ask.what}? The windows ticked start again from zero on every instance at once; requests already counted in them are forgotten. This is in the audit log.`;
  for (const w of WINDOWS) {
    ui.rows[w].hidden = !ask.windows.includes(w);
    ui.boxes[w].checked = false;
  }
  ui.confirm.disabled = true;
  ui.dialog.returnValue = '';
  ui.dialog.showModal();
}

export function setUpWindowReset() {
  for (const w of WINDOWS) ui.boxes[w].addEventListener('change', () => (ui.confirm.disabled = ticked().length === 0));
  ui.dialog.addEventListener('close', async () => {
    const ask = asked;
    asked = null;
    if (ui.dialog.returnValue !== 'reset' || !ask) return;
    const windows = ticked();
    try {
      const answer = await ask.send(windows);
      say(`Reset ${ask.what}: ${heldText(answer)}.`);
      await ask.after();
    } catch (err) {
      ask.errorLine.textContent = messageOf(err);
    }
  });
}
