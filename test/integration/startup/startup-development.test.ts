import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import request from 'supertest';
import {} from '../admin/admin-kit';
import { isolatedEnv, startMain, tempFile, type MainProcess } from './startup-kit';
import { eventually } from '../../support/eventually';

/**
 * The first-run experience of `npm start` in development with nothing configured: an in-process
 * store (said in a warning), a ready key and a curl line, a working gateway, a clean exit on SIGTERM.
 */

const READY =
  /created API key (key_[0-9a-f]{24}) on plan pro \(shown once\):\n {4}(asg_dev_[0-9A-Za-z]{22,})\n {2}try it:\n {4}curl -H "Authorization: Bearer (asg_dev_[0-9A-Za-z]{22,})" (http:\/\/\S+)\/v1\/pets\n/;

let env: Record<string, string>;
/** The key the first start printed; the second start (same DATA_DIR) must still honour it. */
let firstKey: string | null = null;
let running: MainProcess | null = null;

beforeAll(async () => {
  env = await isolatedEnv();
});

afterEach(async () => {
  // A failed assertion must not leave the process behind.
  if (running && running.child.exitCode === null && running.child.signalCode === null) {
    running.child.kill('SIGKILL');
    await running.exited;
  }
  running = null;
});

async function stopWithSigterm(main: MainProcess): Promise<void> {
  main.child.kill('SIGTERM');
  expect(await main.exited).toBe(0);
  expect(main.stderr()).toBe('');
}

test('first start: single-instance warning, ready key and curl line that work; exit 0 on SIGTERM', async () => {
  const main = (running = startMain(env));
  const [, keyId, key, curlKey, gatewayUrl] = await main.waitForStdout(READY);
  const adminToken = (await main.waitForStdout(/^ {2}admin token: (\S+)$/m))[1]!;
  const adminUrl = (await main.waitForStdout(/^ {2}admin API: +(http:\/\/\S+)\/admin\/keys$/m))[1]!;

  expect(curlKey).toBe(key);
  firstKey = key!;
  expect(gatewayUrl).toBe(`http://127.0.0.1:${env.PORT}`);
  expect(adminUrl).toBe(`http://127.0.0.1:${env.ADMIN_PORT}`);
  expect(main.stdout()).toMatch(/REDIS_URL is not set: using the in-process store.*do not run several/);
  // It says which Node it runs on: the one npm brings (the child runs on the same binary as this test).
  expect(main.stdout()).toContain(
    `animal-store-gateway (development, Node ${process.version}) is ready on http://127.0.0.1:${env.PORT}`,
  );
  const listening = JSON.parse((await main.waitForStdout(/^(\{.*"msg":"listening.*\})$/m))[1]!) as Record<
    string,
    unknown
  >;
  expect(listening).toMatchObject({ node: process.version, msg: `listening on Node ${process.version}` });
  // The key is printed once (the curl line repeats it on purpose), and never logged.
  const logLines = main
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'));
  expect(logLines.join('\n')).not.toContain(key!);
  expect(logLines.join('\n')).not.toContain(adminToken);

  const pets = await request(gatewayUrl!).get('/v1/pets').set('Authorization', `Bearer ${key}`);
  expect(pets.status).toBe(200);
  expect(Array.isArray(pets.body)).toBe(true);

  // The printed admin token is the one kept under DATA_DIR, and it works.
  expect(fs.readFileSync(path.join(env.DATA_DIR!, 'admin-token'), 'utf8').trim()).toBe(adminToken);
  const listed = await request(adminUrl).get('/admin/keys').set('Authorization', `Bearer ${adminToken}`).expect(200);
  expect((listed.body as Array<{ id: string; plan: string }>).map((k) => [k.id, k.plan])).toEqual([[keyId, 'pro']]);

  await stopWithSigterm(main);
});

test('second start on the same DATA_DIR: no new key, the first key still works', async () => {
  const main = (running = startMain(env));
  await main.waitForStdout(/is ready on http:\/\/127\.0\.0\.1:\d+\n {2}admin token: \S+\n {2}admin API: +\S+\n\n/);
  expect(main.stdout()).not.toContain('created API key');
  expect(main.stdout()).not.toContain('curl');

  const adminToken = fs.readFileSync(path.join(env.DATA_DIR!, 'admin-token'), 'utf8').trim();
  const listed = await request(`http://127.0.0.1:${env.ADMIN_PORT}`)
    .get('/admin/keys')
    .set('Authorization', `Bearer ${adminToken}`)
    .expect(200);
  expect(listed.body).toHaveLength(1);
  expect(firstKey).not.toBeNull();
  await request(`http://127.0.0.1:${env.PORT}`).get('/v1/pets').set('Authorization', `Bearer ${firstKey}`).expect(200);

  await stopWithSigterm(main);
});

test('SIGTERM with a request held open by the upstream exits 0 within server.shutdownTimeoutMs', async () => {
  // An upstream that accepts requests and never answers, and an upstream timeout far beyond the
  // shutdown timeout: only the shutdown bound can end the process in time.
  const held: http.ServerResponse[] = [];
  const upstream = http.createServer((_req, res) => held.push(res));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const config = tempFile('slow-upstream.yaml', 'upstream:\n  timeoutMs: 60000\nserver:\n  shutdownTimeoutMs: 500\n');
  try {
    const main = (running = startMain(await isolatedEnv({ INVENTORY_URL: upstreamUrl, CONFIG_FILE: config })));
    const [, key, gatewayUrl] = await main.waitForStdout(
      /Bearer (asg_dev_[0-9A-Za-z]{22,})" (http:\/\/\S+)\/v1\/pets\n/,
    );
    const pending = request(gatewayUrl!)
      .get('/v1/pets')
      .set('Authorization', `Bearer ${key}`)
      .then(
        (res) => res.status,
        () => 'connection closed',
      );
    await eventually(async () => held.length === 1);

    const signalledAt = Date.now();
    main.child.kill('SIGTERM');
    expect(await main.exited).toBe(0);
    const tookMs = Date.now() - signalledAt;
    expect(tookMs).toBeGreaterThanOrEqual(400);
    expect(tookMs).toBeLessThan(4000);
    expect(await pending).toBe('connection closed');
  } finally {
    for (const res of held) res.destroy();
    await new Promise((resolve) => upstream.close(resolve));
  }
});
