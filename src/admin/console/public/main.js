// @ts-check
// The operator console's entry module (index.html loads it as <script type="module">): plain
// browser JavaScript, no build step. It wires the views' controls and follows the address.

import { onTokenRefused } from './api.js';
import { setUpConsumers } from './consumers.js';
import { setUpKeyPage } from './key-page.js';
import { setUpKeysList } from './keys-list.js';
import { route, signOut, startRouting } from './router.js';
import { setUpSecretPanel } from './secret.js';
import { setUpSignIn } from './sign-in.js';
import { setUpWindowReset } from './window-reset.js';

onTokenRefused(signOut);
setUpSignIn(() => {
  if (!location.hash || location.hash === '#/') location.hash = '#/overview';
  else route();
});
setUpSecretPanel();
setUpKeysList();
setUpKeyPage();
setUpConsumers();
setUpWindowReset();
startRouting();
