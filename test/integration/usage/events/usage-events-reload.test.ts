import fs from 'node:fs';
import path from 'node:path';
import { ManualClock } from '../../../../src/shared/clock';
import { startTestProduct, type ProductHarness } from '../../../support/product-harness';
import { UsageSink } from '../../../support/usage-sink';
import { eventually } from '../../../support/eventually';
import { useTempDirs } from '../../../support/temp-dirs';
import { adminCall, send, type Admin } from './usage-events-kit';

/**
 * `usageEvents` is reloadable (issue 53): off at start, turned on by POST /admin/reload, and the
 * next closed period reaches the sink, with the token read from its file. In process (SQLite), on
 * a manual clock: the period closes when the test moves the clock, not when time passes.
 */

jest.setTimeout(60_000);

const { tempDir } = useTempDirs('asg-usage-reload-');
const sink = new UsageSink();
let product: ProductHarness;

afterAll(async () => {
  await product?.close();
  await sink.close();
});

test('turned on by a reload: the next closed period is sent, with the bearer token of tokenFile', async () => {
  await sink.start();
  const dir = tempDir();
  const configFile = path.join(dir, 'config.yaml');
  const tokenFile = path.join(dir, 'sink-token');
  fs.writeFileSync(tokenFile, 'om_secret_token\n');
  fs.writeFileSync(configFile, '{}');
  const clock = new ManualClock(Date.UTC(2026, 2, 10, 12, 0, 30));
  product = await startTestProduct({ redis: false, clock, env: { CONFIG_FILE: configFile } });
  const admin: Admin = { url: product.adminUrl, token: product.adminToken };
  const { key, record } = await product.keyService.create({ name: 'metered', plan: 'free' });
  // Off: traffic is counted by the usage history only.
  expect(await send(product.gatewayUrl, key, 'GET')).toBe(200);

  fs.writeFileSync(
    configFile,
    JSON.stringify({
      usageEvents: { enabled: true, url: sink.url, source: 'reloaded', period: 'minute', graceSeconds: 15, tokenFile },
    }),
  );
  const reload = await adminCall<{ result: string; restartNeeded: string[] }>(admin, 'POST', '/admin/reload');
  expect({ status: reload.status, result: reload.body.result, restartNeeded: reload.body.restartNeeded }).toEqual({
    status: 200,
    result: 'success',
    restartNeeded: [],
  });
  clock.set(Date.UTC(2026, 2, 10, 12, 1, 10));
  for (let i = 0; i < 3; i++) expect(await send(product.gatewayUrl, key, 'GET')).toBe(200);
  // The minute 12:01 ends at 12:02; sent once 15 s more have passed (and the history flushed; the
  // closer's own suite shows nothing is sent a millisecond sooner).
  clock.set(Date.UTC(2026, 2, 10, 12, 2, 15));
  await eventually(() => sink.events.size === 2, {
    timeoutMs: 20_000,
    what: () => `2 events at the sink, got ${sink.events.size}`,
  });
  const events = [...sink.events.values()];
  // Units: the day window's count by then, 4, the request made before the reload included (so the
  // day's events add up to the export's units); requests: the 3 of the period.
  expect(events.map((e) => [e.type, e.subject, e.time, e.data!.units, e.data!.admitted])).toEqual([
    ['gateway.usage.units', record.id, '2026-03-10T12:01:00.000Z', 4, 3],
    ['gateway.usage.requests', record.id, '2026-03-10T12:01:00.000Z', 4, 3],
  ]);
  const exported = await adminCall<unknown>(admin, 'GET', '/admin/usage/export?from=2026-03-10&to=2026-03-10');
  expect(JSON.parse(exported.text.trim())).toEqual(
    expect.objectContaining({ keyId: record.id, units: 4, admitted: 4 }),
  );
  expect(sink.lastHeaders.authorization).toBe('Bearer om_secret_token');
  expect(sink.lastHeaders['content-type']).toBe('application/cloudevents-batch+json');
});
