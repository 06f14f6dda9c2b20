// @ts-check
// Sign-in: the admin token is tried against the admin API and kept only when accepted.

import { signIn } from './api.js';
import { byId } from './dom.js';

const ui = {
  form: byId('sign-in-form', HTMLFormElement),
  token: byId('token', HTMLInputElement),
  button: byId('sign-in-submit', HTMLButtonElement),
  error: byId('sign-in-error', HTMLElement),
};

/** Ready for the token. */
export function showSignIn() {
  ui.token.focus();
}

/** Why the operator is back at sign-in (signed out, token refused); empty for no reason given. */
export function tellSignIn(/** @type {string} */ message) {
  ui.error.textContent = message;
}

/** @param {() => void} signedIn what to show once the token is accepted */
export function setUpSignIn(signedIn) {
  ui.form.addEventListener('submit', async (event) => {
    event.preventDefault();
    ui.button.disabled = true;
    ui.error.textContent = '';
    try {
      const result = await signIn(ui.token.value.trim());
      if (!result.ok) {
        ui.error.textContent = result.problem;
        return;
      }
      ui.token.value = '';
      signedIn();
    } finally {
      ui.button.disabled = false;
    }
  });
}
