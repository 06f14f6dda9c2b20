import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ManualClock } from '../../../src/shared/clock';
import { eventId } from '../../../src/notifications/events';
import { eventually } from '../../support/eventually';
import { WebhookReceiver } from '../../support/webhook-receiver';
import { call, deliveriesCounted, outboxEvents, startWithWebhooks } from './notifications-kit';

/**
 * Issue 40 without Redis: the outbox is SQLite under DATA_DIR, so an event the gateway could not
 * deliver before a restart is delivered after it, with the same webhook-id.
 */

jest.setTimeout(60_000);

const DAY_MS = 86_400_000;

test('an event survives the gateway restart while its receiver is down, and is delivered after it with the same id', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-webhooks-'));
  const receiver = new WebhookReceiver();
  await receiver.start();
  const port = receiver.port;
  await receiver.stop();
  const clock = new ManualClock(Date.now());
  const options = { redis: false, dataDir, clock };

  const first = await startWithWebhooks([receiver], options);
  let keyId: string;
  try {
    const { key, record } = await first.keyService.create({
      name: 'metered',
      plan: 'free',
      limits: { perMinute: 100, perDay: 5 },
    });
    keyId = record.id;
    for (let i = 0; i < 4; i++) expect(await call(first, key)).toBe(200);
    // The receiver is down: the first attempt fails and the event stays.
    await eventually(async () => (await deliveriesCounted(first, 'quota.threshold', 'failure')) === 1, {
      what: 'a failed attempt',
      timeoutMs: 20_000,
    });
    expect(await outboxEvents(first)).toBe(1);
  } finally {
    await first.close();
  }

  const back = await new WebhookReceiver(receiver.secret).start(port);
  const second = await startWithWebhooks([back], options);
  try {
    clock.advance(6000);
    await eventually(() => back.deliveredIds().length === 1, {
      what: 'the delivery after the restart',
      timeoutMs: 20_000,
    });
    const dayStart = Math.floor(clock.now() / DAY_MS) * DAY_MS;
    expect(back.deliveries.map((d) => ({ id: d.id, data: d.body.data }))).toEqual([
      {
        id: eventId('quota.threshold', 'key', keyId, 'day', dayStart, 80),
        data: expect.objectContaining({ keyId, threshold: 80, used: 4, limit: 5 }),
      },
    ]);
    await eventually(async () => (await outboxEvents(second)) === 0, { what: 'an empty outbox', timeoutMs: 20_000 });
  } finally {
    await second.close();
    await back.stop();
  }
});
