import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { eventually } from '../../support/eventually';
import { logLinesWith } from '../../support/log-lines';
import { WebhookReceiver } from '../../support/webhook-receiver';
import { call, deliveriesCounted, outboxEvents, startTestProduct, type ProductHarness } from './notifications-kit';

/**
 * Issue 48 item 10: the events waiting for a receiver that a reload (or the config of a restart)
 * removed leave the outbox, counted as dropped and logged, so the outbox gauge and the alert on it
 * fall; a receiver still configured keeps getting its events. On both outboxes.
 */

jest.setTimeout(60_000);

function webhooks(...receivers: WebhookReceiver[]): string {
  return stringify({
    notifications: { webhooks: receivers.map((r) => ({ url: r.url, secret: r.secret, events: ['quota.threshold'] })) },
  });
}

async function reload(product: ProductHarness): Promise<number> {
  const res = await fetch(new URL('/admin/reload', product.adminUrl), {
    method: 'POST',
    headers: { authorization: `Bearer ${product.adminToken}` },
  });
  await res.arrayBuffer();
  return res.status;
}

/** A key whose 4th request of 5 a day crosses 80 %: one quota.threshold event. */
async function crossEightyPercent(product: ProductHarness): Promise<void> {
  const { key } = await product.keyService.create({
    name: 'crossing',
    plan: 'free',
    limits: { perMinute: 100, perDay: 5 },
  });
  for (let i = 0; i < 4; i++) expect(await call(product, key)).toBe(200);
}

function droppedLines(product: ProductHarness): Array<{ deliveries: number }> {
  return logLinesWith(product, {
    msg: 'webhook deliveries to receivers no longer in the config dropped from the outbox',
  }) as Array<{ deliveries: number }>;
}

describe.each([
  ['Redis', true],
  ['SQLite', false],
])('%s outbox: a receiver removed from the config', (_name, redis) => {
  let kept: WebhookReceiver;
  let removed: WebhookReceiver;
  let configFile: string;
  const products: ProductHarness[] = [];

  beforeEach(async () => {
    kept = await new WebhookReceiver().start();
    removed = await new WebhookReceiver().start();
    // A receiver that refuses everything: its deliveries wait in the outbox for retries.
    removed.behaviour = () => 500;
    configFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-webhooks-removed-')), 'config.yaml');
    fs.writeFileSync(configFile, webhooks(kept, removed));
  });

  afterEach(async () => {
    for (const product of products.splice(0)) await product.close();
    await kept.stop();
    await removed.stop();
  });

  async function start(options: { dataDir?: string; namespace?: string } = {}): Promise<ProductHarness> {
    const product = await startTestProduct({ redis, env: { CONFIG_FILE: configFile }, ...options });
    products.push(product);
    return product;
  }

  /** One event, delivered to `kept`, failed once at `removed` and waiting there. */
  async function eventWaitingForRemoved(product: ProductHarness): Promise<void> {
    await crossEightyPercent(product);
    await eventually(() => kept.deliveredIds().length === 1, {
      what: 'the delivery to the kept receiver',
      timeoutMs: 20_000,
    });
    await eventually(() => removed.deliveries.length >= 1, {
      what: 'an attempt at the failing receiver',
      timeoutMs: 20_000,
    });
    expect(await outboxEvents(product)).toBe(1);
  }

  test('by a reload: its events leave the outbox, counted as dropped; the receiver kept still gets new ones', async () => {
    const product = await start();
    await eventWaitingForRemoved(product);
    expect(await deliveriesCounted(product, 'quota.threshold', 'dropped')).toBe(0);

    fs.writeFileSync(configFile, webhooks(kept));
    expect(await reload(product)).toBe(200);
    await eventually(async () => (await outboxEvents(product)) === 0, {
      what: 'the outbox emptied of the removed receiver',
    });
    expect(await deliveriesCounted(product, 'quota.threshold', 'dropped')).toBe(1);
    expect(droppedLines(product)).toEqual([
      expect.objectContaining({ deliveries: 1, byEvent: { 'quota.threshold': 1 } }),
    ]);

    const attemptsAtRemoved = removed.deliveries.length;
    await crossEightyPercent(product);
    await eventually(() => kept.deliveredIds().length === 2, {
      what: 'the next event at the kept receiver',
      timeoutMs: 20_000,
    });
    await eventually(async () => (await outboxEvents(product)) === 0, { what: 'the next event finished' });
    expect(removed.deliveries.length).toBe(attemptsAtRemoved);
    expect(kept.rejected).toEqual([]);
  });

  test('by a restart with a config without it: its events are dropped at start', async () => {
    const first = await start();
    await eventWaitingForRemoved(first);
    await first.close();
    products.splice(products.indexOf(first), 1);

    fs.writeFileSync(configFile, webhooks(kept));
    const second = await start({
      dataDir: first.dataDir,
      ...(redis ? { namespace: first.config.redis.namespace } : {}),
    });
    await eventually(async () => (await outboxEvents(second)) === 0, { what: 'the outbox emptied at start' });
    expect(await deliveriesCounted(second, 'quota.threshold', 'dropped')).toBe(1);
  });
});
