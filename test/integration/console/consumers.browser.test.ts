import type { Page } from 'playwright-core';
import { ManualClock } from '../../../src/shared/clock';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { launchChromium, type RunningBrowser } from '../../support/browser';

/**
 * The console's consumers (issue 38) in a real chromium against the whole product on loopback: the
 * consumers page creates one, its page shows its shared windows and its keys, a key's page links
 * to its consumer, and deleting a consumer that still has an active key is refused on the page.
 */
jest.setTimeout(60_000);

let product: ProductHarness;
let chromium: RunningBrowser;
let page: Page;
const pageProblems: string[] = [];
let deliberateConflicts = 0;

beforeAll(async () => {
  // The product's clock held 5 s into this minute: the pages read minute windows after requests
  // counted in them, and a real UTC minute turning in between (a fresh-clone CI read "0 of 10 used"
  // at :00) would empty them. The browser, the timers and the requests stay real time.
  product = await startTestProduct({ clock: new ManualClock(Math.floor(Date.now() / 60_000) * 60_000 + 5_000) });
  chromium = await launchChromium();
  page = await chromium.context.newPage();
  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    if (/status of 409/.test(message.text()) && deliberateConflicts > 0) deliberateConflicts--;
    else pageProblems.push(message.text());
  });
  page.on('pageerror', (err) => pageProblems.push(err.message));
  await page.goto(`${product.adminUrl}/console/`);
  await page.locator('#token').fill(product.adminToken);
  await page.keyboard.press('Enter');
  await page.locator('#overview').waitFor({ state: 'visible' });
});

afterAll(async () => {
  await chromium?.close();
  await product?.close();
});

async function admin(method: string, pathname: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(new URL(pathname, product.adminUrl), {
    method,
    headers: {
      Authorization: `Bearer ${product.adminToken}`,
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await res.json()) as Record<string, unknown>;
}

test('create a consumer on the consumers page, see its windows and keys, reach it from a key, refuse its delete while a key is active', async () => {
  await page.locator('#nav a[data-section="consumers"]').click();
  await page.locator('#consumer-create-name').fill('Acme');
  await page.locator('#consumer-create-per-minute').fill('10');
  await page.locator('#consumer-create-per-month').fill('1000');
  await page.locator('#consumer-create-form button[type="submit"]').click();
  // The section shows before its data arrives: its title is set first of what one render fills in.
  await page.waitForFunction(
    () =>
      (
        globalThis as unknown as { document: { getElementById(id: string): { textContent: string } | null } }
      ).document.getElementById('consumer-title')?.textContent === 'Acme',
  );
  await page.locator('#consumer').waitFor({ state: 'visible' });
  const consumerId = decodeURIComponent(new URL(page.url()).hash.replace('#/consumers/', ''));
  expect(consumerId).toMatch(/^con_[0-9a-f]{24}$/);
  expect(await page.locator('#consumer-facts').textContent()).toContain('10/min · 1,000/month');
  expect(await page.locator('#consumer-windows .window').count()).toBe(2);

  const key = await admin('POST', '/admin/keys', { name: 'ci key', plan: 'pro', consumerId });
  await fetch(new URL('/v1/pets', product.gatewayUrl), { headers: { Authorization: `Bearer ${String(key.key)}` } });
  await page.goto(`${product.adminUrl}/console/#/keys/${String(key.id)}`);
  await page.locator('#key-consumer').click();
  await page.locator('#consumer').waitFor({ state: 'visible' });
  await page.locator('#consumer-keys-body a', { hasText: 'ci key' }).waitFor();
  // The key's request counted in the consumer's minute and month.
  const windowsText = await page.locator('#consumer-windows').textContent();
  expect(windowsText).toContain('1 of 10 used');
  expect(windowsText).toContain('1 of 1,000 used');

  deliberateConflicts = 1;
  await page.locator('#consumer-delete').click();
  await page.waitForFunction(
    () =>
      (globalThis as unknown as { document: { getElementById(id: string): { textContent: string } | null } }).document
        .getElementById('consumer-error')
        ?.textContent?.includes('active key') ?? false,
  );
  expect((await admin('GET', `/admin/consumers/${consumerId}`)).id).toBe(consumerId);

  await page.locator('#nav a[data-section="consumers"]').click();
  await page.locator('#consumers-body a', { hasText: 'Acme' }).waitFor();
  expect(pageProblems).toEqual([]);
});

type Doc = { document: { getElementById(id: string): { textContent: string | null } | null } };
/** Waits until the element's text contains `part` (the page refreshes by itself). */
async function textContains(id: string, part: string): Promise<void> {
  await page.waitForFunction(
    ([i, p]) => (globalThis as unknown as Doc).document.getElementById(i!)?.textContent?.includes(p!) ?? false,
    [id, part],
  );
}

test("reset windows from a key's page and a consumer's: a dialog asks which, cancel sends nothing, confirm resets and says what each held", async () => {
  const consumer = await admin('POST', '/admin/consumers', { name: 'Reset Co', limits: { perMinute: 2, perDay: 100 } });
  const key = await admin('POST', '/admin/keys', {
    name: 'reset key',
    plan: 'enterprise',
    limits: { perMinute: 3, perDay: 50, perMonth: 1000 },
    consumerId: consumer.id,
  });
  const send = () =>
    fetch(new URL('/v1/pets?limit=1', product.gatewayUrl), {
      headers: { Authorization: `Bearer ${String(key.key)}` },
    }).then(async (r) => (await r.arrayBuffer(), r.status));
  expect([await send(), await send(), await send()]).toEqual([200, 200, 429]);

  await page.goto(`${product.adminUrl}/console/#/keys/${String(key.id)}`);
  await textContains('window-minute-text', '2 of 3 used');
  // Cancel: nothing is sent, the windows keep their counts.
  await page.locator('#reset-windows').click();
  await page.locator('#reset-dialog').waitFor({ state: 'visible' });
  expect(await page.locator('#reset-text').textContent()).toContain(`“reset key” (${String(key.id)})`);
  expect(await page.locator('#reset-month-row').isVisible()).toBe(true);
  expect(await page.locator('#reset-confirm').isDisabled()).toBe(true);
  await page.locator('#reset-minute').check();
  await page.locator('#reset-dialog button[value="cancel"]').click();
  await page.locator('#reset-dialog').waitFor({ state: 'hidden' });
  expect(
    ((await admin('GET', `/admin/keys/${String(key.id)}`)).usage as { minute: { remaining: number } }).minute.remaining,
  ).toBe(1);
  // Confirm: the key's minute and month, as ticked.
  await page.locator('#reset-windows').click();
  await page.locator('#reset-minute').check();
  await page.locator('#reset-month').check();
  await page.locator('#reset-confirm').click();
  await textContains('status', 'minute held 2 of 3, month held 2 of 1,000');
  await textContains('window-minute-text', '0 of 3 used');
  const usage = (await admin('GET', `/admin/keys/${String(key.id)}`)).usage as Record<string, { remaining: number }>;
  expect([usage.minute!.remaining, usage.day!.remaining, usage.month!.remaining]).toEqual([3, 48, 1000]);

  // The consumer's page offers its own windows (no month: it has no perMonth).
  await page.goto(`${product.adminUrl}/console/#/consumers/${String(consumer.id)}`);
  await textContains('consumer-windows', '2 of 2 used');
  await page.locator('#consumer-reset-windows').click();
  await page.locator('#reset-dialog').waitFor({ state: 'visible' });
  expect(await page.locator('#reset-month-row').isVisible()).toBe(false);
  await page.locator('#reset-minute').check();
  await page.locator('#reset-confirm').click();
  await textContains('status', 'minute held 2 of 2');
  await textContains('consumer-windows', '0 of 2 used');
  expect(await send()).toBe(200);
  const audit = (await admin('GET', '/admin/audit?limit=5')).entries as Array<{ action: string; keyId: string }>;
  expect(audit.filter((e) => e.action === 'reset').map((e) => e.keyId)).toEqual([consumer.id, key.id]);
  expect(pageProblems).toEqual([]);
});
