import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

/** Debian's chromium; playwright-core drives it and downloads no browser of its own. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const INSTALL_HINT = `chromium is not at ${CHROMIUM_PATH}. Install it (Debian: \`apt-get install chromium\`) or set CHROMIUM_PATH.`;

export interface RunningBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

/**
 * A headless chromium on a fresh profile, with everything that would reach the network on its own
 * (component updates, sync, background fetches, QUIC probes) turned off: the console must work offline.
 */
export async function launchChromium(): Promise<RunningBrowser> {
  if (!fs.existsSync(CHROMIUM_PATH)) throw new Error(INSTALL_HINT);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-chromium-'));
  // Playwright takes the profile directory as an argument of a persistent context, not as a flag.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1280, height: 900 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Where the browser suites put their screenshots (git-ignored): look at them after a run. */
export const SCREENSHOT_DIR = path.resolve(__dirname, '../../screenshots');
