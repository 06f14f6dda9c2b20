import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { eventually } from '../../support/eventually';
import { WebhookReceiver } from '../../support/webhook-receiver';
import { call, outboxEvents } from './notifications-kit';
import { loopbackNameFromHosts } from '../../support/loopback-names';
import { startupFailureLine } from '../../../src/lifecycle';

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

async function reload(): Promise<{
  status: number;
  body: { result?: string; restartNeeded?: string[]; errors?: Array<{ setting: string; message: string }> };
}> {
  const res = await fetch(new URL('/admin/reload', product.adminUrl), {
    method: 'POST',
    headers: { authorization: `Bearer ${product.adminToken}` },
  });
  return { status: res.status, body: (await res.json()) as never };
}

async function crossEightyPercent(): Promise<string> {
  const { key, record } = await product.keyService.create({
    name: 'crossing',
    plan: 'free',
    limits: { perMinute: 100, perDay: 5 },
  });
  for (let i = 0; i < 4; i++) expect(await call(product, key)).toBe(200);
  return record.id;
}

test('without receivers nothing is kept; a reload that adds one is in force for the next crossing', async () => {
  await crossEightyPercent();
  expect(await outboxEvents(product)).toBe(0);

  fs.writeFileSync(
    configFile,
    stringify({
      notifications: { webhooks: [{ url: receiver.url, secret: receiver.secret, events: ['quota.threshold'] }] },
    }),
  );
  expect(await reload()).toEqual({
    status: 200,
    body: expect.objectContaining({ result: 'success', restartNeeded: [] }),
  });
  const keyId = await crossEightyPercent();
  await eventually(() => receiver.deliveredIds().length === 1, { what: 'the delivery', timeoutMs: 20_000 });
  expect(receiver.deliveries[0]!.body.data).toEqual(expect.objectContaining({ keyId, threshold: 80 }));

  // GET /admin/config shows the receiver, never its secret.
  const shown = await (
    await fetch(new URL('/admin/config', product.adminUrl), {
      headers: { authorization: `Bearer ${product.adminToken}` },
    })
  ).text();
  expect(shown).toContain(`${new URL(receiver.url).origin}/[redacted]`);
  expect(shown).not.toContain(receiver.secret.slice('whsec_'.length));
});

test('a reload with a bad receiver is refused, naming each problem, and the receivers in force stay', async () => {
  fs.writeFileSync(
    configFile,
    stringify({
      notifications: { webhooks: [{ url: 'ftp://hooks.example/x' }, { url: receiver.url, secret: 'whsec_short' }] },
    }),
  );
  const refused = await reload();
  expect(refused.status).toBe(400);
  expect(refused.body.errors).toEqual([
    { setting: 'notifications.webhooks.0.url', message: 'must be an http:// or https:// URL' },
    {
      setting: 'notifications.webhooks.0.secret',
      message: expect.stringMatching(/^is required \(or secretFile\): must be whsec_/),
    },
    {
      setting: 'notifications.webhooks.1.secret',
      message: expect.stringMatching(/^must be whsec_ followed by the base64 of 24 to 64 random bytes/),
    },
  ]);
  const before = receiver.deliveredIds().length;
  await crossEightyPercent();
  await eventually(() => receiver.deliveredIds().length === before + 1, {
    what: 'a delivery to the receiver still in force',
    timeoutMs: 20_000,
  });
  expect(receiver.rejected).toEqual([]);
});

/** Issue 48 (item 7): no receiver may be this gateway's admin listener, in any written form or by any name. */
test("a receiver URL that reaches this gateway's admin listener is refused on reload, in every form and by a name resolving to loopback", async () => {
  const adminPort = Number(new URL(product.adminUrl).port);
  const name = loopbackNameFromHosts();
  const forms = [
    `http://[::ffff:127.0.0.1]:${adminPort}/admin/reload`,
    `http://[::127.0.0.1]:${adminPort}/admin/reload`,
    `http://[0:0:0:0:0:0:0:1]:${adminPort}/admin/reload`,
    `http://${name}:${adminPort}/admin/reload`,
    `http://hooks.localhost:${adminPort}/admin/reload`,
  ];
  for (const url of forms) {
    fs.writeFileSync(configFile, stringify({ notifications: { webhooks: [{ url, secret: receiver.secret }] } }));
    const refused = await reload();
    expect({ url, status: refused.status, errors: refused.body.errors }).toEqual({
      url,
      status: 400,
      errors: [
        {
          setting: 'notifications.webhooks.0.url',
          message: expect.stringContaining(`points at this gateway's admin listener (127.0.0.1:${adminPort})`),
        },
      ],
    });
  }
  // Another port of this machine is another service.
  fs.writeFileSync(
    configFile,
    stringify({
      notifications: { webhooks: [{ url: `http://${name}:${receiver.port}/hooks`, secret: receiver.secret }] },
    }),
  );
  expect((await reload()).status).toBe(200);
});

test('a receiver whose name resolves to the admin listener stops startup, with one line naming the setting and the address', async () => {
  const name = loopbackNameFromHosts();
  // The config's admin port is the one checked before the listener is open; nothing needs to listen on it.
  const adminPort = 9;
  const start = startTestProduct({
    redis: false,
    overrides: {
      server: { adminPort },
      notifications: { webhooks: [{ url: `http://${name}:${adminPort}/admin/reload`, secret: receiver.secret }] },
    },
  });
  const failure = await start.then(
    async (started) => {
      await started.close();
      return null;
    },
    (err: unknown) => err,
  );
  expect(failure).not.toBeNull();
  expect(startupFailureLine(failure)).toMatch(
    new RegExp(
      `^animal-store-gateway: cannot start: invalid setting notifications\\.webhooks\\.0\\.url: points at this gateway's admin listener \\(127\\.0\\.0\\.1:9\\) \\(${name.replace(/\./g, '\\.')} resolves to (127\\.[0-9.]+|::1)\\); a receiver must be another service$`,
    ),
  );
});

/** Issue 48 (item 12): a receiver's token in its URL path or query is a secret: never shown, logged or hashed. */
test("a token in a receiver URL's path or query is in no answer, no log line and not in gateway_config_info: the hash stays when only the token changes", async () => {
  const admin = { headers: { authorization: `Bearer ${product.adminToken}` } };
  const configInfo = async () =>
    /gateway_config_info\{hash="([0-9a-f]+)"\} 1/.exec(
      await (await fetch(new URL('/metrics', product.adminUrl))).text(),
    )?.[1];
  const withUrl = (url: string) =>
    fs.writeFileSync(configFile, stringify({ notifications: { webhooks: [{ url, secret: receiver.secret }] } }));

  withUrl('https://hooks.example/T0KEN/x?token=abc');
  expect((await reload()).status).toBe(200);
  const shown = await (await fetch(new URL('/admin/config', product.adminUrl), admin)).text();
  expect(shown).toContain('https://hooks.example/[redacted]?token=[redacted]');
  const hash = await configInfo();
  expect(hash).toMatch(/^[0-9a-f]{64}$/);
  expect(JSON.parse(shown).hash).toBe(hash);

  // A delivery that fails (the name does not resolve) is logged with its URL: as shown, not as configured.
  const linesBefore = product.logs.lines.length;
  await crossEightyPercent();
  await eventually(
    () => product.logs.lines.slice(linesBefore).some((line) => line.includes('webhook delivery failed')),
    { what: "the failed delivery's log line" },
  );
  const logged = product.logs.lines.slice(linesBefore).find((line) => line.includes('webhook delivery failed'))!;
  expect(JSON.parse(logged).url).toBe('https://hooks.example/[redacted]?token=[redacted]');

  withUrl('https://hooks.example/T0KEN2/x?token=abd');
  expect(await reload()).toEqual({ status: 200, body: expect.objectContaining({ result: 'success', hash }) });
  expect(await configInfo()).toBe(hash);
  // (`abc` alone turns up in the hex of ids: the query value is looked for as the query holds it.)
  for (const text of [
    shown,
    await (await fetch(new URL('/admin/config', product.adminUrl), admin)).text(),
    product.logs.text(),
  ]) {
    expect(text).not.toContain('T0KEN');
    expect(text).not.toContain('token=abc');
    expect(text).not.toContain('token=abd');
  }
});
