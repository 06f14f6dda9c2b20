import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import { admin, startTestProduct, type ProductHarness } from './gateway-kit';
import { LONG_ADMIN_TOKEN, isolatedEnv, startMain, tempFile, type MainProcess } from '../startup/startup-kit';

/**
 * Issue 42 / CONTRACT §4: month windows and credits survive a restart of the gateway, in process
 * too. In process a restart reset every month window and erased audited credits: they lived in
 * memory only. Units taken are written off the request path (batched); credits before the admin
 * answer, so even a crash right after the grant keeps them.
 */
jest.setTimeout(180_000);

/** 15 March 2026, mid-month, mid-day: nothing in these tests straddles a window. */
const NOW = Date.UTC(2026, 2, 15, 12, 0, 17, 500);
const overrides = {
  plans: { metered: { perMinute: 1000, perDay: 10_000, perMonth: 100 } },
  anonymous: { perMinute: 1000 },
};

describe.each([
  ['on Redis', true],
  ['in process', false],
] as const)('a restart %s', (_where, redis) => {
  let product: ProductHarness | null = null;
  afterEach(async () => {
    await product?.close();
    product = null;
  });

  it('keeps every month window and its credits: the restarted gateway shows the same remaining', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-month-restart-'));
    const namespace = `asg:month-restart:${process.pid}:${Date.now()}`;
    const clock = new ManualClock(NOW);
    product = await startTestProduct({ redis, dataDir, namespace, clock, overrides });
    const created = await request(product.adminUrl)
      .post('/admin/keys')
      .set('Authorization', `Bearer ${product.adminToken}`)
      .send({ name: 'metered', plan: 'metered' })
      .expect(201);
    const { id, key } = created.body as { id: string; key: string };
    const auth = `Bearer ${key}`;
    for (let i = 0; i < 7; i++)
      await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
    const granted = await request(product.adminUrl)
      .post(`/admin/keys/${id}/credits`)
      .set('Authorization', `Bearer ${product.adminToken}`)
      .send({ units: 50 })
      .expect(200);
    expect(granted.body.usage.month).toMatchObject({ limit: 150, remaining: 143, credits: 50 });
    await product.close();

    product = await startTestProduct({ redis, dataDir, namespace, clock, overrides });
    const usage = await request(product.gatewayUrl).get('/v1/usage').set('Authorization', auth).expect(200);
    expect(usage.body.windows.find((w: { name: string }) => w.name === 'month')).toEqual({
      name: 'month',
      limit: 150,
      remaining: 143,
      reset: Date.UTC(2026, 3, 1) / 1000,
    });
    expect((await admin(product).get(`/admin/keys/${id}`).expect(200)).body.usage.month).toMatchObject({
      limit: 150,
      remaining: 143,
      credits: 50,
    });
    // And it goes on counting from there.
    const next = await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
    expect(next.headers.ratelimit).toContain('"month";r=142;');

    // A month that has ended is gone after a restart, as it is without one: the next month starts from its quota.
    await product.close();
    clock.set(Date.UTC(2026, 3, 2, 12));
    product = await startTestProduct({ redis, dataDir, namespace, clock, overrides });
    const april = await request(product.gatewayUrl).get('/v1/usage').set('Authorization', auth).expect(200);
    expect(april.body.windows.find((w: { name: string }) => w.name === 'month')).toMatchObject({
      limit: 100,
      remaining: 100,
    });
  });
});

describe('in process, a crash right after a grant', () => {
  let main: MainProcess | null = null;
  afterEach(async () => {
    if (main && main.child.exitCode === null && main.child.signalCode === null) main.child.kill('SIGKILL');
    await main?.exited;
    main = null;
  });

  it('keeps the credits: they are on disk before the admin answer', async () => {
    const env = await isolatedEnv({
      APP_ENV: 'staging',
      ADMIN_TOKEN: LONG_ADMIN_TOKEN,
      SIGNING_SECRET: 'startup-signing-secret-0123456789abcdef-long-enough',
      CONFIG_FILE: tempFile('metered.yaml', 'plans:\n  metered: { perMinute: 1000, perDay: 10000, perMonth: 100 }\n'),
    });
    const adminUrl = `http://127.0.0.1:${env.ADMIN_PORT}`;
    const headers = { authorization: `Bearer ${LONG_ADMIN_TOKEN}`, 'content-type': 'application/json' };
    const start = async () => {
      main = startMain(env);
      await main.waitForStdout(/"msg":"listening/);
    };
    await start();
    const created = await fetch(`${adminUrl}/admin/keys`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ name: 'metered', plan: 'metered' }),
    });
    const { id } = (await created.json()) as { id: string };
    expect(
      (
        await fetch(`${adminUrl}/admin/keys/${id}/credits`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ units: 25 }),
        })
      ).status,
    ).toBe(200);
    main!.child.kill('SIGKILL');
    await main!.exited;

    await start();
    const shown = (await (await fetch(`${adminUrl}/admin/keys/${id}`, { headers })).json()) as {
      usage: { month: { credits: number; remaining: number } };
    };
    expect(shown.usage.month).toMatchObject({ credits: 25, remaining: 125 });
  });
});
