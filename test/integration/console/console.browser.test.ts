import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { launchChromium, SCREENSHOT_DIR, type RunningBrowser } from '../../support/browser';

/**
 * The operator console in a real chromium against the whole product on loopback (real Redis, real
 * SQLite, real HTTP): every step an operator takes, checked on the page and through the gateway.
 * Steps run in order and share the key they create. Screenshots land in screenshots/ (git-ignored).
 */

jest.setTimeout(60_000);

// The page.evaluate callbacks run in the browser; the project's type library is Node's, without the DOM.
interface PageElement {
  textContent: string | null;
  getAttribute(name: string): string | null;
  querySelectorAll(selector: string): { length: number };
}
declare const document: {
  getElementById(id: string): PageElement | null;
  documentElement: { scrollWidth: number; clientWidth: number };
};

let product: ProductHarness;
let chromium: RunningBrowser;
let page: Page;
const pageProblems: string[] = [];
const foreignRequests: string[] = [];
let keyId = '';
let firstSecret = '';
let rotatedSecret = '';
let sessionStart = 0;
/** Refusals (400) a step provokes on purpose; the console reports each as a failed resource load. */
let deliberateBadRequests = 0;

async function shoot(name: string): Promise<void> {
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

async function gateway(key: string, pathname = '/v1/pets'): Promise<{ status: number; code?: string }> {
  const res = await fetch(new URL(pathname, product.gatewayUrl), { headers: { Authorization: `Bearer ${key}` } });
  const body = (await res.json()) as { code?: string };
  return { status: res.status, code: body.code };
}

async function textOf(selector: string): Promise<string> {
  return (await page.locator(selector).textContent()) ?? '';
}

/** What the admin API answers the operator's token, straight from Node: what the page should be showing. */
async function adminGet<T>(pathname: string): Promise<T> {
  const res = await fetch(new URL(pathname, product.adminUrl), {
    headers: { Authorization: `Bearer ${product.adminToken}` },
  });
  expect(res.status).toBe(200);
  return (await res.json()) as T;
}

interface KeyView {
  plan: string;
  limits: { perMinute: number; perDay: number } | null;
  usage: { minute: { limit: number }; day: { limit: number } };
}

/** One fact on the key page ("Plan", "Limits", …), as shown. */
async function keyFact(name: string): Promise<string> {
  const fact = page
    .locator('#key-facts > div')
    .filter({ has: page.locator('dt', { hasText: new RegExp(`^${name}$`) }) });
  return (await fact.locator('dd').textContent()) ?? '';
}

interface ShiftMark {
  origin: number;
  at: number;
}
const markNow = (): Promise<ShiftMark> =>
  page.evaluate(() => ({ origin: performance.timeOrigin, at: performance.now() }));

/**
 * Total layout shift on this document since `mark` (Chromium's Layout
 * Instability API), input-driven shifts aside. From a mark, not from the document's start: the
 * console is one document for the whole session, and a sign-in answered more than 500 ms after the
 * key press (a crowded machine) counts its switch of views as a shift that is not input-driven.
 */
async function layoutShift(mark: ShiftMark): Promise<number> {
  const { total, moved } = await page.evaluate(
    ({ origin, at }) =>
      new Promise<{ total: number; moved: string[] }>((resolve) => {
        // Another document since the mark (a full load): all of this one's shifts count.
        const since = performance.timeOrigin === origin ? at : 0;
        let total = 0;
        const moved: string[] = [];
        new PerformanceObserver((list) => {
          type Source = {
            node?: { id?: string; tagName?: string; className?: string };
            previousRect: { y: number; height: number };
            currentRect: { y: number; height: number };
          };
          for (const entry of list.getEntries() as unknown as Array<{
            value: number;
            hadRecentInput: boolean;
            startTime: number;
            sources: Source[];
          }>) {
            if (entry.hadRecentInput || entry.startTime < since) continue;
            total += entry.value;
            for (const source of entry.sources ?? []) {
              const node = source.node;
              const name = node
                ? `${node.tagName ?? '#text'}${node.id ? `#${node.id}` : ''}${node.className ? `.${String(node.className).split(' ')[0]}` : ''}`
                : '?';
              moved.push(
                `${entry.value.toFixed(4)} ${name} y ${source.previousRect.y}->${source.currentRect.y} h ${source.previousRect.height}->${source.currentRect.height}`,
              );
            }
          }
        }).observe({ type: 'layout-shift' as never, buffered: true });
        setTimeout(() => resolve({ total, moved }), 100);
      }),
    mark,
  );
  // What moved, for a shift that fails the check: the element names the part of the page without reserved space.
  if (total > 0) process.stdout.write(`layout shift ${total.toFixed(4)} on ${page.url()}:\n  ${moved.join('\n  ')}\n`);
  return total;
}

/** Wider than the viewport means a horizontal scroll bar: unreadable at 200 % zoom. */
async function overflowsHorizontally(): Promise<boolean> {
  return page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth + 1);
}

beforeAll(async () => {
  sessionStart = Date.now();
  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  // The wrong-token step must not lock the test's own address out of the admin API. The plan
  // `trial` is not in the default config: the page can only offer it by asking GET /admin/plans.
  product = await startTestProduct({
    overrides: {
      admin: { failedTokensPerMinute: 100, failedTokensPerMinuteTotal: 1000 },
      plans: { trial: { perMinute: 5, perDay: 50 } },
    },
  });
  chromium = await launchChromium();
  page = await chromium.context.newPage();
  page.on('console', (message) => {
    // The deliberate wrong token shows as a failed (401) resource load in the console; anything else is a problem.
    if (message.type() !== 'error' || /status of 401/.test(message.text())) return;
    if (/status of 400/.test(message.text()) && deliberateBadRequests > 0) deliberateBadRequests--;
    else pageProblems.push(message.text());
  });
  page.on('pageerror', (err) => pageProblems.push(err.message));
  page.on('request', (req) => {
    if (!req.url().startsWith(product.adminUrl)) foreignRequests.push(req.url());
  });
});

afterAll(async () => {
  await chromium?.close();
  await product?.close();
});

test('GET /console: the page with a strict Content-Security-Policy, no framing, no referrer, no cookie', async () => {
  const res = await fetch(new URL('/console', product.adminUrl));
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/html/);
  const csp = res.headers.get('content-security-policy') ?? '';
  expect(csp).toContain("default-src 'none'");
  expect(csp).toContain("script-src 'self'");
  expect(csp).toContain("style-src 'self'");
  expect(csp).toContain("connect-src 'self'");
  expect(csp).toContain("frame-ancestors 'none'");
  expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:/);
  expect(res.headers.get('x-frame-options')).toBe('DENY');
  expect(res.headers.get('referrer-policy')).toBe('no-referrer');
  expect(res.headers.get('set-cookie')).toBeNull();
  const html = await res.text();
  // No inline script or style for the policy to have to allow, no asset from another origin.
  expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  expect(html).not.toMatch(/<style|\sstyle=/);
  expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
});

test('a wrong admin token is refused with a clear message, and nothing is shown', async () => {
  await page.goto(new URL('/console', product.adminUrl).href);
  await page.locator('#token').fill('not-the-admin-token');
  await page.keyboard.press('Enter');
  await page.waitForFunction(
    () => document.getElementById('sign-in-error')?.textContent === 'That admin token is not valid.',
  );
  expect(await page.locator('#nav').isHidden()).toBe(true);
  expect(await page.locator('#overview').isHidden()).toBe(true);
  expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
  await shoot('01-sign-in-wrong-token');
});

test('signing in with the keyboard opens the overview: health, bans, charts, no cookie set', async () => {
  await page.locator('#token').fill(product.adminToken);
  await page.keyboard.press('Enter');
  // From the moment the overview shows: what its data does to the layout as it arrives.
  await page.locator('#overview').waitFor({ state: 'visible' });
  const shown = await markNow();
  await page.waitForFunction(() => document.getElementById('health-store')?.textContent === 'OK');
  expect(await textOf('#health-upstream')).toBe('OK');
  expect(await textOf('#active-bans')).toBe('0');
  expect(await textOf('#config-status')).toBe(
    `Config ${product.configState.hash.slice(0, 12)} · not reloaded since start`,
  );
  expect(await page.locator('#chart-status svg').count()).toBe(1);
  expect(await textOf('#chart-status')).toContain('No requests in the last 15 minutes');
  expect(await textOf('#top-keys-body')).toBe('No key traffic in the last 5 minutes');
  expect(await chromium.context.cookies()).toEqual([]);
  expect(await page.evaluate(() => sessionStorage.getItem('asg-admin-token'))).toBe(product.adminToken);
  expect(await layoutShift(shown)).toBeLessThan(0.01);
  await shoot('02-overview-empty');
});

test('the overview stops asking while the tab is hidden and asks again when it shows', async () => {
  let statsRequests = 0;
  const count = (req: { url(): string }) => {
    if (req.url().endsWith('/admin/stats')) statsRequests++;
  };
  page.on('request', count);
  const setHidden = (hidden: boolean) =>
    page.evaluate((value) => {
      const doc = (globalThis as unknown as { document: EventTarget }).document;
      Object.defineProperty(doc, 'hidden', { value, configurable: true });
      Object.defineProperty(doc, 'visibilityState', { value: value ? 'hidden' : 'visible', configurable: true });
      doc.dispatchEvent(new Event('visibilitychange'));
    }, hidden);
  try {
    await setHidden(true);
    statsRequests = 0;
    // Longer than the 5 s refresh: a visible tab would have asked at least once.
    await page.waitForTimeout(6000);
    expect(statsRequests).toBe(0);
    expect(await textOf('#status')).toBe('Paused while the tab is hidden.');
    const asked = page.waitForRequest((req) => req.url().endsWith('/admin/stats'), { timeout: 2000 });
    await setHidden(false);
    await asked;
  } finally {
    page.off('request', count);
  }
});

test('keyboard: a skip link that shows when focused, then the sections, each reachable with Tab and Enter', async () => {
  await page.goto(new URL('/console#/overview', product.adminUrl).href);
  await page.locator('#overview').waitFor({ state: 'visible' });
  const skip = page.getByRole('link', { name: 'Skip to content' });
  await skip.focus();
  expect((await skip.boundingBox())!.x).toBeGreaterThanOrEqual(0);
  const focusedText = () =>
    page.evaluate(() =>
      (
        globalThis as unknown as { document: { activeElement: { textContent: string } } }
      ).document.activeElement.textContent.trim(),
    );
  await page.keyboard.press('Tab');
  expect(await focusedText()).toBe('Overview');
  await page.keyboard.press('Tab');
  expect(await focusedText()).toBe('Keys');
  await page.keyboard.press('Enter');
  await page.locator('#keys').waitFor({ state: 'visible' });
  await page.getByRole('link', { name: 'Overview' }).click();
  await page.locator('#overview').waitFor({ state: 'visible' });
});

test('every form control has a label', async () => {
  const unlabelled = await page
    .locator('input, select')
    .evaluateAll((controls) =>
      controls
        .filter(
          (c) =>
            (c as unknown as { labels: { length: number } | null }).labels?.length === 0 &&
            !c.getAttribute('aria-label'),
        )
        .map((c) => c.id || c.outerHTML),
    );
  expect(unlabelled).toEqual([]);
});

test("the plan choices are the server's (GET /admin/plans), in the config's order, an added plan included", async () => {
  await page.goto(new URL('/console#/keys', product.adminUrl).href);
  // A reload starts the page afresh with the token of this tab: it asks for the plans again.
  const plansAsked = page.waitForRequest((req) => req.url().endsWith('/admin/plans'), { timeout: 5000 });
  await page.reload();
  await plansAsked;
  const { plans } = await adminGet<{ plans: Array<{ name: string }> }>('/admin/plans');
  const names = plans.map((plan) => plan.name);
  expect(names).toEqual(['free', 'pro', 'business', 'enterprise', 'trial']);
  await page.waitForFunction(() => document.getElementById('key-plan-filter')?.querySelectorAll('option').length === 6);
  expect(await page.locator('#create-plan option').allTextContents()).toEqual(names);
  expect(await page.locator('#key-plan-filter option').allTextContents()).toEqual(['Any plan', ...names]);
});

test('create a key: shown once, with a copy button and a warning, then gone from the page', async () => {
  await page.getByRole('link', { name: 'Keys' }).click();
  await page.getByRole('button', { name: 'New key' }).click();
  await page.getByLabel('Name').first().fill('browser-checkout');
  await page.locator('#create-plan').selectOption('free');
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.locator('#secret-panel').waitFor({ state: 'visible' });
  firstSecret = await page.locator('#secret-value').inputValue();
  expect(firstSecret).toMatch(/^asg_dev_/);
  expect(await textOf('#secret-panel')).toContain('It will not be shown again');
  expect(await page.getByRole('button', { name: 'Copy' }).isVisible()).toBe(true);
  await shoot('03-key-created-shown-once');

  await page.getByRole('button', { name: 'I have copied it' }).click();
  expect(await page.locator('#secret-panel').isHidden()).toBe(true);
  expect(await page.locator('#secret-value').inputValue()).toBe('');
  const row = page.locator('#keys-body tr', { hasText: 'browser-checkout' });
  await row.waitFor();
  keyId = (await row.locator('td.mono').textContent()) ?? '';
  expect(keyId).not.toBe('');
  expect(await page.content()).not.toContain(firstSecret);
});

test('search by name and filter by plan and state', async () => {
  await page.getByLabel('Search by name or id').fill('checkout');
  expect(await page.locator('#keys-body tr').count()).toBe(1);
  await page.locator('#key-plan-filter').selectOption('pro');
  expect(await textOf('#keys-body')).toContain('No key matches.');
  await page.locator('#key-plan-filter').selectOption('free');
  await page.locator('#key-state-filter').selectOption('active');
  expect(await page.locator('#keys-body tr', { hasText: 'browser-checkout' }).count()).toBe(1);
  await page.getByLabel('Search by name or id').fill(keyId.slice(0, 6));
  expect(await page.locator('#keys-body tr', { hasText: 'browser-checkout' }).count()).toBe(1);
  await shoot('04-keys-filtered');
});

test('traffic through the gateway with the key shows in the overview', async () => {
  for (let i = 0; i < 3; i++) expect(await gateway(firstSecret)).toEqual({ status: 200, code: undefined });
  // The deprecated operation, so the key shows among its callers.
  expect((await gateway(firstSecret, '/v1/pets/999999')).status).toBe(404);
  await page.getByRole('link', { name: 'Overview' }).click();
  await page.waitForFunction(() => document.getElementById('total-requests')?.textContent === '4', undefined, {
    timeout: 20_000,
  });
  expect(await textOf('#legend-plan')).toContain('free');
  expect(await textOf('#legend-status')).toContain('2xx');
  expect(await textOf('#legend-status')).toContain('4xx');
  expect(await page.locator('#chart-status rect').count()).toBeGreaterThan(0);
  // The busiest keys of the last 5 minutes (GET /admin/stats/top-keys): this key, its 4 requests, no 429.
  await page.waitForFunction(() => document.getElementById('top-keys-body')?.querySelectorAll('tr').length === 1);
  const busiest = page.locator('#top-keys-body tr').first();
  expect(await busiest.locator('td').allTextContents()).toEqual(['browser-checkout', '4', '0']);
  expect(await busiest.getByRole('link', { name: 'browser-checkout' }).getAttribute('href')).toBe(`#/keys/${keyId}`);
  await shoot('05-overview-with-traffic');
});

test("the key's page: live windows and the 30-day usage chart", async () => {
  const opened = await markNow();
  await page.goto(new URL(`/console#/keys/${keyId}`, product.adminUrl).href);
  await page.waitForFunction(() => document.getElementById('key-title')?.textContent === 'browser-checkout');
  // The minute window may have turned since the traffic; the day window holds all four.
  expect(await textOf('#window-minute-text')).toMatch(/^[0-4] of 60 used/);
  expect(await textOf('#window-day-text')).toMatch(/^4 of 1,000 used/);
  // Usage counts reach the store at most 5 s after the traffic; the page refreshes every 5 s.
  await page.waitForFunction(
    () => /: 4 admitted in all$/.test(document.getElementById('chart-usage')?.getAttribute('aria-label') ?? ''),
    undefined,
    {
      timeout: 20_000,
    },
  );
  expect(await page.locator('#chart-usage rect').count()).toBe(1);
  expect(await layoutShift(opened)).toBeLessThan(0.01);
  await shoot('06-key-detail-usage');
});

test('change the plan and the expiry: the page and the gateway see the new limits', async () => {
  await page.locator('#edit-plan').selectOption('pro');
  // datetime-local takes the operator's local time; a year ahead is in the future in any zone.
  const nextYear = new Date().getFullYear() + 1;
  await page.getByLabel('Expires (your time zone; empty for never)').fill(`${nextYear}-06-01T12:00`);
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.waitForFunction(() => /300\/min/.test(document.getElementById('key-facts')?.textContent ?? ''));
  expect(await textOf('#key-facts')).toContain(`Jun 1, ${nextYear}`);
  const res = await fetch(new URL('/v1/pets', product.gatewayUrl), {
    headers: { Authorization: `Bearer ${firstSecret}` },
  });
  expect(res.headers.get('ratelimit-policy')).toContain('"minute";q=300');
});

test("per-key limits: both overrides replace the plan's, a rename keeps them, one alone is refused on the page, none puts the plan's back", async () => {
  // The key is on pro (300/min, 10,000/day) since the step before.
  await page.getByLabel('Per minute override').fill('500');
  await page.getByLabel('Per day override').fill('5000');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.waitForFunction(
    () => /500\/min/.test(document.getElementById('key-facts')?.textContent ?? ''),
    undefined,
    { timeout: 5000 },
  );
  expect(await keyFact('Limits')).toBe('500/min · 5,000/day');
  expect(await keyFact('Plan')).toBe('pro');
  expect(await textOf('#window-minute-text')).toMatch(/ of 500 used/);
  expect(await textOf('#window-day-text')).toMatch(/ of 5,000 used/);
  expect(await textOf('#status')).toBe('Saved the changes to “browser-checkout”.');
  let key = await adminGet<KeyView>(`/admin/keys/${keyId}`);
  expect(key).toMatchObject({
    plan: 'pro',
    limits: { perMinute: 500, perDay: 5000 },
    usage: { minute: { limit: 500 }, day: { limit: 5000 } },
  });
  let res = await fetch(new URL('/v1/pets', product.gatewayUrl), {
    headers: { Authorization: `Bearer ${firstSecret}` },
  });
  expect(res.headers.get('ratelimit-policy')).toBe('"minute";q=500;w=60, "day";q=5000;w=86400');
  await shoot('06a-key-limits-overridden');

  // The form now shows the override; a save that changes only the name leaves it alone.
  expect([
    await page.getByLabel('Per minute override').inputValue(),
    await page.getByLabel('Per day override').inputValue(),
  ]).toEqual(['500', '5000']);
  await page.locator('#edit-name').fill('browser-checkout-renamed');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.waitForFunction(() => /renamed/.test(document.getElementById('status')?.textContent ?? ''), undefined, {
    timeout: 5000,
  });
  key = await adminGet<KeyView>(`/admin/keys/${keyId}`);
  expect(key).toMatchObject({
    name: 'browser-checkout-renamed',
    plan: 'pro',
    limits: { perMinute: 500, perDay: 5000 },
  });
  const renamed = await adminGet<{ entries: Array<{ action: string; details: Record<string, unknown> }> }>(
    '/admin/audit?limit=1',
  );
  expect(renamed.entries[0]!.details).not.toHaveProperty('limits');
  await page.locator('#edit-name').fill('browser-checkout');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.waitForFunction(
    () => document.getElementById('status')?.textContent === 'Saved the changes to “browser-checkout”.',
    undefined,
    { timeout: 5000 },
  );

  // One limit without the other: the page says what it needs and sends nothing.
  await page.getByLabel('Per minute override').fill('700');
  await page.getByLabel('Per day override').fill('');
  const patches: string[] = [];
  const onRequest = (r: { method(): string; url(): string }) => {
    if (r.method() === 'PATCH') patches.push(r.url());
  };
  page.on('request', onRequest);
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.waitForFunction(() => document.getElementById('edit-error')?.textContent !== '', undefined, {
    timeout: 5000,
  });
  page.off('request', onRequest);
  expect(patches).toEqual([]);
  expect(await textOf('#edit-error')).toBe(
    "Give both limits (per minute and per day), or empty both to use the plan's limits.",
  );
  expect(await keyFact('Limits')).toBe('500/min · 5,000/day');
  key = await adminGet<KeyView>(`/admin/keys/${keyId}`);
  expect(key).toMatchObject({ plan: 'pro', limits: { perMinute: 500, perDay: 5000 } });
  await shoot('06b-key-limits-one-override-refused');

  // Both empty: the override goes, and the key is held to its plan's limits again.
  await page.getByLabel('Per minute override').fill('');
  await page.getByLabel('Per day override').fill('');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.waitForFunction(
    () => /300\/min/.test(document.getElementById('key-facts')?.textContent ?? ''),
    undefined,
    { timeout: 5000 },
  );
  expect(await keyFact('Limits')).toBe('300/min · 10,000/day');
  expect(await textOf('#edit-error')).toBe('');
  expect(await textOf('#window-day-text')).toMatch(/ of 10,000 used/);
  key = await adminGet<KeyView>(`/admin/keys/${keyId}`);
  // GET shows the limits the key is held to; the audit entry shows the override itself is gone, not set to the plan's values.
  expect(key).toMatchObject({
    plan: 'pro',
    limits: { perMinute: 300, perDay: 10000 },
    usage: { minute: { limit: 300 }, day: { limit: 10000 } },
  });
  const { entries } = await adminGet<{
    entries: Array<{ action: string; keyId: string; details: Record<string, unknown> }>;
  }>('/admin/audit?limit=1');
  expect(entries[0]).toMatchObject({ action: 'update', keyId, details: { limits: null } });
  res = await fetch(new URL('/v1/pets', product.gatewayUrl), { headers: { Authorization: `Bearer ${firstSecret}` } });
  expect(res.headers.get('ratelimit-policy')).toContain('"minute";q=300');
});

test("access policy: the key page shows and edits the key's lists; the gateway refuses outside them; a bad entry is named", async () => {
  expect(await keyFact('Allowed operations')).toBe('all');
  expect(await keyFact('Allowed addresses')).toBe('any');
  await page.getByLabel('Allowed operations (listPets, createPet, getPet; empty for all)').fill('listPets');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.waitForFunction(
    () => /listPets \(and usage\)/.test(document.getElementById('key-facts')?.textContent ?? ''),
    undefined,
    { timeout: 5000 },
  );
  expect(await gateway(firstSecret, '/v1/pets/1')).toEqual({ status: 403, code: 'operation_not_allowed' });
  expect((await gateway(firstSecret)).status).toBe(200);
  await shoot('06c-key-access-policy');

  // A malformed range: the admin API's 400 names it under the form, and nothing changes.
  await page.getByLabel('Allowed addresses (IPs and CIDR ranges; empty for any)').fill('10.0.0.0/33');
  // The browser logs the 400 as a failed resource load: expected here, not a problem.
  deliberateBadRequests++;
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.waitForFunction(
    () => /10\.0\.0\.0\/33/.test(document.getElementById('edit-error')?.textContent ?? ''),
    undefined,
    { timeout: 5000 },
  );
  expect(await keyFact('Allowed addresses')).toBe('any');

  // Emptied fields remove the lists.
  await page.getByLabel('Allowed addresses (IPs and CIDR ranges; empty for any)').fill('');
  await page.getByLabel('Allowed operations (listPets, createPet, getPet; empty for all)').fill('');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.waitForFunction(
    () => /Allowed operationsall/.test(document.getElementById('key-facts')?.textContent ?? ''),
    undefined,
    { timeout: 5000 },
  );
  // (The refused getPet above never reached the sunset step, so the deprecation report counts none of it.)
  const { entries } = await adminGet<{ entries: Array<{ action: string; details: Record<string, unknown> }> }>(
    '/admin/audit?limit=1',
  );
  expect(entries[0]).toMatchObject({ action: 'update', details: { allowedOperations: null } });
});

test('rotate with a grace period: a new secret shown once, the old one still served', async () => {
  await page.getByLabel('Old key keeps working for (seconds)').fill('120');
  await page.getByRole('button', { name: 'Rotate' }).click();
  await page.locator('#secret-panel').waitFor({ state: 'visible' });
  rotatedSecret = await page.locator('#secret-value').inputValue();
  expect(rotatedSecret).toMatch(/^asg_dev_/);
  expect(rotatedSecret).not.toBe(firstSecret);
  expect(await textOf('#secret-title')).toContain('the old one works until');
  expect(await textOf('#key-facts')).not.toMatch(/Previous secret works until–/);
  expect((await gateway(rotatedSecret)).status).toBe(200);
  expect((await gateway(firstSecret)).status).toBe(200);
  await shoot('07-key-rotated');
  await page.getByRole('button', { name: 'I have copied it' }).click();
});

test('a banned key: the overview counts the ban, the key page lifts it', async () => {
  const res = await fetch(new URL('/admin/keys', product.adminUrl), {
    method: 'POST',
    headers: { Authorization: `Bearer ${product.adminToken}`, 'Content-Type': 'application/json' },
    // The day window is the one spent, so no minute boundary during the test can refill it.
    body: JSON.stringify({ name: 'browser-retry-storm', plan: 'enterprise', limits: { perMinute: 1000, perDay: 1 } }),
  });
  const stormy = (await res.json()) as { id: string; key: string };
  // One admitted, then more 429s than ban.threshold (10) within ban.windowSeconds: banned.
  const codes = [];
  for (let i = 0; i < 13; i++) codes.push((await gateway(stormy.key)).code);
  expect(codes.at(-1)).toBe('temporarily_banned');

  await page.goto(new URL('/console#/overview', product.adminUrl).href);
  await page.waitForFunction(() => document.getElementById('active-bans')?.textContent === '1', undefined, {
    timeout: 10_000,
  });
  await page.waitForFunction(
    () => Number(document.getElementById('rejections-body')?.textContent?.match(/ban(\d+)/)?.[1] ?? 0) >= 1,
    undefined,
    { timeout: 10_000 },
  );
  await shoot('08-overview-with-a-ban');

  await page.goto(new URL(`/console#/keys/${stormy.id}`, product.adminUrl).href);
  await page.waitForFunction(() => document.getElementById('key-state')?.textContent === 'banned');
  await page.getByRole('button', { name: 'Lift the ban' }).click();
  await page.waitForFunction(() => document.getElementById('key-state')?.textContent === 'active');
  // The ban is gone; the day window is still spent, so the gateway says why, not "banned".
  expect(await gateway(stormy.key)).toEqual({ status: 429, code: 'rate_limited' });
  await page.goto(new URL(`/console#/keys/${keyId}`, product.adminUrl).href);
  await page.waitForFunction(() => document.getElementById('key-title')?.textContent === 'browser-checkout');
});

test('a month quota: the overview counts month refusals, the key page shows the month bar and its reset day, and credits serve the key again', async () => {
  const res = await fetch(new URL('/admin/keys', product.adminUrl), {
    method: 'POST',
    headers: { Authorization: `Bearer ${product.adminToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({
      name: 'browser-metered',
      plan: 'enterprise',
      limits: { perMinute: 1000, perDay: 1000, perMonth: 3 },
      billingDay: 20,
    }),
  });
  const metered = (await res.json()) as { id: string; key: string };
  for (let i = 0; i < 3; i++) expect((await gateway(metered.key)).status).toBe(200);
  expect(await gateway(metered.key)).toEqual({ status: 429, code: 'rate_limited' });

  await page.goto(new URL('/console#/overview', product.adminUrl).href);
  await page.waitForFunction(
    () => Number(document.getElementById('rejections-body')?.textContent?.match(/month(\d+)/)?.[1] ?? 0) >= 1,
    undefined,
    { timeout: 10_000 },
  );

  await page.goto(new URL(`/console#/keys/${metered.id}`, product.adminUrl).href);
  await page.waitForFunction(() => document.getElementById('key-title')?.textContent === 'browser-metered');
  const detail = await adminGet<{ usage: { month: { reset: number } } }>(`/admin/keys/${metered.id}`);
  const resetDay = new Date(detail.usage.month.reset * 1000).toISOString().slice(0, 10);
  expect(resetDay).toMatch(/-20$/);
  expect(await textOf('#window-month-text')).toBe(`3 of 3 used · resets ${resetDay} 00:00 UTC (billing day 20)`);
  await page.getByLabel('Credits for this billing month (units)').fill('2');
  await page.getByRole('button', { name: 'Add credits' }).click();
  await page.waitForFunction(
    () => /3 of 5 \(2 credited\) used/.test(document.getElementById('window-month-text')?.textContent ?? ''),
    undefined,
    { timeout: 5000 },
  );
  expect((await gateway(metered.key)).status).toBe(200);
  await shoot('08b-key-month-credits');
  // The plain key's page has no month bar and no credits form.
  await page.goto(new URL(`/console#/keys/${keyId}`, product.adminUrl).href);
  await page.waitForFunction(() => document.getElementById('key-title')?.textContent === 'browser-checkout');
  expect(await page.locator('#window-month-row').isHidden()).toBe(true);
  expect(await page.locator('#credits-form').isHidden()).toBe(true);
});

test('revoke with a confirmation naming the key: the gateway answers 401 to both secrets', async () => {
  await page.getByRole('button', { name: 'Revoke…' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  expect(await dialog.textContent()).toContain(`“browser-checkout” (${keyId})`);
  await shoot('09-revoke-confirmation');
  await dialog.getByRole('button', { name: 'Revoke “browser-checkout”' }).click();
  await page.waitForFunction(() => document.getElementById('key-state')?.textContent === 'revoked');
  expect(await page.locator('#key-revoked-note').isVisible()).toBe(true);
  expect(await page.locator('#key-actions').isHidden()).toBe(true);
  expect(await gateway(rotatedSecret)).toEqual({ status: 401, code: 'revoked_api_key' });
  expect(await gateway(firstSecret)).toEqual({ status: 401, code: 'revoked_api_key' });
  await shoot('10-key-revoked');
});

test('deprecations: the key among the callers of the deprecated operation, with the days to its sunset', async () => {
  await page.getByRole('link', { name: 'Deprecations' }).click();
  await page.waitForFunction(() =>
    /GET \/v1\/pets\/\{petId\}/.test(document.getElementById('deprecations-body')?.textContent ?? ''),
  );
  const body = await textOf('#deprecations-body');
  expect(body).toMatch(/days left/);
  expect(body).toContain('browser-checkout');
  // Each column of the key's row against the admin API: its plan now, one call (the 404 above), and when.
  const report = await adminGet<{
    routes: Array<{
      method: string;
      route: string;
      callers: Array<{ keyId: string; name: string | null; plan: string | null; count: number; lastCallAt: string }>;
    }>;
  }>('/admin/deprecations');
  const caller = report.routes
    .find((r) => r.method === 'GET' && r.route === '/v1/pets/{petId}')
    ?.callers.find((c) => c.keyId === keyId);
  expect(caller).toMatchObject({ name: 'browser-checkout', plan: 'pro', count: 1 });
  expect(Date.parse(caller!.lastCallAt)).toBeGreaterThanOrEqual(sessionStart - 1000);
  expect(Date.parse(caller!.lastCallAt)).toBeLessThanOrEqual(Date.now());
  // The operator's time zone and locale, to the minute, as the browser formats it.
  const lastCallShown = await page.evaluate(
    (iso) =>
      new Date(iso).toLocaleString(undefined, {
        year: 'numeric',
        month: 'short',
        day: 'numeric',
        hour: '2-digit',
        minute: '2-digit',
      }),
    caller!.lastCallAt,
  );
  const row = page
    .locator('#deprecations-body .panel', { hasText: 'GET /v1/pets/{petId}' })
    .locator('tbody tr', { hasText: 'browser-checkout' });
  expect(await row.locator('td').allTextContents()).toEqual(['browser-checkout', 'pro', '1', lastCallShown]);
  expect(await row.locator('a').getAttribute('href')).toBe(`#/keys/${keyId}`);
  await shoot('11-deprecations');
});

test('audit log: the create, the updates, the rotate and the revoke, newest first', async () => {
  await page.getByRole('link', { name: 'Audit log' }).click();
  await page.waitForFunction(() => (document.getElementById('audit-body')?.querySelectorAll('tr').length ?? 0) >= 4);
  const rows = await page.locator('#audit-body tr', { hasText: keyId }).locator('td:nth-child(2)').allTextContents();
  // Plan and expiry; both overrides; the rename and its undoing; none (the one-limit save sent nothing); the access list set and removed.
  expect(rows).toEqual([
    'revoke',
    'rotate',
    'update',
    'update',
    'update',
    'update',
    'update',
    'update',
    'update',
    'create',
  ]);
  expect(await page.locator('#audit-body tr', { hasText: keyId }).first().textContent()).toContain('browser-checkout');
  expect(await page.locator('#audit-body tr td:nth-child(2)').allTextContents()).toContain('unban');
  expect(await page.content()).not.toContain(rotatedSecret);
  await shoot('12-audit-log');
});

test('readable at 200 % zoom: no horizontal scrolling on any page', async () => {
  // 200 % zoom of a 1280×900 window lays the page out in 640×450 CSS pixels.
  await page.setViewportSize({ width: 640, height: 450 });
  for (const hash of ['#/overview', '#/keys', `#/keys/${keyId}`, '#/deprecations', '#/audit']) {
    await page.goto(new URL(`/console${hash}`, product.adminUrl).href);
    await page.waitForLoadState('networkidle');
    expect({ hash, overflows: await overflowsHorizontally() }).toEqual({ hash, overflows: false });
  }
  await page.goto(new URL('/console#/overview', product.adminUrl).href);
  await page.waitForFunction(() => document.getElementById('health-store')?.textContent === 'OK');
  await shoot('13-overview-at-200-percent');
  await page.goto(new URL(`/console#/keys/${keyId}`, product.adminUrl).href);
  await page.waitForFunction(() => document.getElementById('key-state')?.textContent === 'revoked');
  await shoot('14-key-at-200-percent');
  await page.setViewportSize({ width: 1280, height: 900 });
});

test('signing out forgets the token', async () => {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.locator('#sign-in').waitFor({ state: 'visible' });
  expect(await page.evaluate(() => sessionStorage.getItem('asg-admin-token'))).toBeNull();
});

test("the admin API's lockout after wrong tokens reaches the sign-in form as a wait, not as a wrong token", async () => {
  const strict = await startTestProduct({ overrides: { admin: { failedTokensPerMinute: 1 } } });
  const other = await chromium.context.newPage();
  try {
    await other.goto(new URL('/console', strict.adminUrl).href);
    for (const attempt of ['wrong-once', 'wrong-twice']) {
      await other.locator('#token').fill(attempt);
      await other.keyboard.press('Enter');
      await other.waitForFunction(
        () =>
          (
            globalThis as unknown as { document: { getElementById(id: string): { textContent: string } } }
          ).document.getElementById('sign-in-error').textContent !== '',
      );
      if (attempt === 'wrong-once') {
        expect(await other.locator('#sign-in-error').textContent()).toBe('That admin token is not valid.');
        // The next answer must be a new one, not this one still on the page.
        await other.evaluate(() => {
          (
            globalThis as unknown as { document: { getElementById(id: string): { textContent: string } } }
          ).document.getElementById('sign-in-error').textContent = '';
        });
      }
    }
    expect(await other.locator('#sign-in-error').textContent()).toMatch(
      /^Too many wrong tokens from this address\. Try again in \d+ seconds\.$/,
    );
  } finally {
    await other.close();
    await strict.close();
  }
});

test('no script error, no policy violation, no request to another origin during the whole session', () => {
  expect(pageProblems).toEqual([]);
  expect(deliberateBadRequests).toBe(0);
  expect(foreignRequests).toEqual([]);
});
