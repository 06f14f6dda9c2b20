import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { WebhookReceiver, waitUntil } from '../../support/webhook-receiver';
import { call, outboxEvents } from './notifications-kit';

/**
 * Issue 40: notifications.webhooks is validated on reload as at start, and a valid change is in
 * force for what is found and delivered afterwards, without a restart.
 */

jest.setTimeout(60_000);

let product: ProductHarness;
let receiver: WebhookReceiver;
const configFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-webhooks-reload-')), 'config.yaml');

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  fs.writeFileSync(configFile, stringify({ notifications: { webhooks: [] } }));
  product = await startTestProduct({ redis: false, env: { CONFIG_FILE: configFile } });
});

afterAll(async () => {
  await product?.close();
  await receiver?.stop();
});

async function reload(): Promise<{ status: number; body: { result?: string; restartNeeded?: string[]; errors?: Array<{ setting: string; message: string }> } }> {
  const res = await fetch(new URL('/admin/reload', product.adminUrl), { method: 'POST', headers: { authorization: `Bearer ${product.adminToken}` } });
  return { status: res.status, body: (await res.json()) as never };
}

async function crossEightyPercent(): Promise<string> {
  const { key, record } = await product.keyService.create({ name: 'crossing', plan: 'free', limits: { perMinute: 100, perDay: 5 } });
  for (let i = 0; i < 4; i++) expect(await call(product, key)).toBe(200);
  return record.id;
}

test('without receivers nothing is kept; a reload that adds one is in force for the next crossing', async () => {
  await crossEightyPercent();
  expect(await outboxEvents(product)).toBe(0);

  fs.writeFileSync(configFile, stringify({ notifications: { webhooks: [{ url: receiver.url, secret: receiver.secret, events: ['quota.threshold'] }] } }));
  expect(await reload()).toEqual({ status: 200, body: expect.objectContaining({ result: 'success', restartNeeded: [] }) });
  const keyId = await crossEightyPercent();
  await waitUntil('the delivery', () => receiver.deliveredIds().length === 1);
  expect(receiver.deliveries[0]!.body.data).toEqual(expect.objectContaining({ keyId, threshold: 80 }));

  // GET /admin/config shows the receiver, never its secret.
  const shown = await (await fetch(new URL('/admin/config', product.adminUrl), { headers: { authorization: `Bearer ${product.adminToken}` } })).text();
  expect(shown).toContain(receiver.url);
  expect(shown).not.toContain(receiver.secret.slice('whsec_'.length));
});

test('a reload with a bad receiver is refused, naming each problem, and the receivers in force stay', async () => {
  fs.writeFileSync(configFile, stringify({ notifications: { webhooks: [{ url: 'ftp://hooks.example/x' }, { url: receiver.url, secret: 'whsec_short' }] } }));
  const refused = await reload();
  expect(refused.status).toBe(400);
  expect(refused.body.errors).toEqual([
    { setting: 'notifications.webhooks.0.url', message: 'must be an http:// or https:// URL' },
    { setting: 'notifications.webhooks.0.secret', message: expect.stringMatching(/^is required \(or secretFile\): must be whsec_/) },
    { setting: 'notifications.webhooks.1.secret', message: expect.stringMatching(/^must be whsec_ followed by the base64 of 24 to 64 random bytes/) },
  ]);
  const before = receiver.deliveredIds().length;
  await crossEightyPercent();
  await waitUntil('a delivery to the receiver still in force', () => receiver.deliveredIds().length === before + 1);
  expect(receiver.rejected).toEqual([]);
});
