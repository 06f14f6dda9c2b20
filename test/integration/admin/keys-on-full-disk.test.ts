import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { REPO_ROOT, rawRequest, type RawResponse } from '../../support/inventory-harness';
import { freePort } from '../../support/redis-server';
import { mountTmpfs, type Tmpfs } from '../../support/tmpfs';
import { eventually } from '../../support/eventually';
import { START_HANG_GUARD_MS } from '../startup/startup-kit';

/**
 * `npm start` without Redis (src/main.ts as a real child process): keys, audit and usage live in
 * SQLite under DATA_DIR, here a 2 MiB tmpfs filled to the last byte. POST /admin/keys is 201 and
 * stored or 503 with the Error body, and a refused key is nowhere, not even in memory; /readyz
 * names the database; after space returns, writes resume; after a SIGKILL and a restart the
 * store holds exactly the acknowledged keys (issue 32, CONTRACT §7).
 */

const ADMIN_TOKEN = 'keys-on-full-disk-admin-token-0123456789';

interface ProductProcess {
  child: ChildProcess;
  adminUrl: string;
  exited: Promise<unknown>;
}

async function spawnProduct(dataDir: string): Promise<ProductProcess> {
  const [port, adminPort, inventoryPort] = [await freePort(), await freePort(), await freePort()];
  const child = spawn(process.execPath, ['-r', './test/support/ts-register.js', 'src/main.ts'], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      DATA_DIR: dataDir,
      PORT: String(port),
      ADMIN_PORT: String(adminPort),
      INVENTORY_PORT: String(inventoryPort),
      HOST: '127.0.0.1',
      ADMIN_TOKEN,
      SIGNING_SECRET: 'keys-on-full-disk-signing-secret-0123456789',
      SQLITE_BUSY_TIMEOUT_MS: '200',
      // staging: no development key created at startup, so the keys are exactly the test's.
      APP_ENV: 'staging',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  // The start guard of docs/testing.md: a hang guard, not a claim about speed.
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`the product exited before it was ready:\n${stderr}`);
      return fetch(`${adminUrl}/healthz`).then(
        (res) => res.status === 200,
        () => false, // not listening yet
      );
    },
    { timeoutMs: START_HANG_GUARD_MS, pollMs: 100, what: () => `the product answering /healthz:\n${stderr}` },
  );
  return { child, adminUrl, exited };
}

const auth = { Authorization: `Bearer ${ADMIN_TOKEN}` };

function postKey(proc: ProductProcess, name: string): Promise<RawResponse> {
  return rawRequest(proc.adminUrl, {
    method: 'POST',
    path: '/admin/keys',
    headers: { ...auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name, plan: 'free' }),
  });
}

async function keyIds(proc: ProductProcess): Promise<string[]> {
  const res = await rawRequest(proc.adminUrl, { method: 'GET', path: '/admin/keys', headers: auth });
  expect(res.status).toBe(200);
  return (res.body as Array<{ id: string }>).map((k) => k.id).sort();
}

async function readyzBecomes(proc: ProductProcess, status: number): Promise<RawResponse> {
  let last: RawResponse | undefined;
  await eventually(
    async () => (last = await rawRequest(proc.adminUrl, { method: 'GET', path: '/readyz' })).status === status,
    { pollMs: 100, what: () => `/readyz ${status} (last ${last?.status}: ${JSON.stringify(last?.body)})` },
  );
  return last!;
}

describe('in-process key store on a full disk', () => {
  let disk: Tmpfs | undefined;
  const running: ProductProcess[] = [];

  afterAll(async () => {
    for (const proc of running) {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
      await proc.exited;
    }
    disk?.unmount();
  });

  it('POST /admin/keys: 201 and stored, or 503 and no key anywhere; /readyz names the database; a crash keeps exactly the 201s', async () => {
    disk = mountTmpfs('keys-full', 2 * 1024 * 1024);
    const proc = await spawnProduct(disk.dir);
    running.push(proc);
    const acknowledged: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const res = await postKey(proc, `before ${i}`);
      expect(res.status).toBe(201);
      acknowledged.push((res.body as { id: string }).id);
    }

    const filler = disk.fill();
    let refused = 0;
    for (let i = 0; i < 20; i += 1) {
      const res = await postKey(proc, `full ${i} ${'n'.repeat(100)}`);
      if (res.status === 201) {
        acknowledged.push((res.body as { id: string }).id);
        continue;
      }
      expect({ status: res.status, body: res.body }).toEqual({
        status: 503,
        body: { code: 'service_unavailable', message: expect.any(String), status: 503 },
      });
      expect(res.headers['retry-after']).toBe('5');
      refused += 1;
    }
    expect(refused).toBeGreaterThan(0);
    // A refused key is not in memory either: the list is exactly the acknowledged ones.
    expect(await keyIds(proc)).toEqual([...acknowledged].sort());
    const notReady = await readyzBecomes(proc, 503);
    expect(notReady.body).toMatchObject({
      code: 'service_unavailable',
      failing: expect.arrayContaining(['keys database']),
    });
    expect((notReady.body as { message: string }).message).toMatch(/keys database cannot take writes \(SQLITE_FULL/);
    const metrics = (await rawRequest(proc.adminUrl, { method: 'GET', path: '/metrics' })).text;
    expect(metrics).toMatch(/^gateway_sqlite_errors_total\{database="keys",code="SQLITE_FULL"\} [1-9]\d*$/m);

    fs.rmSync(filler);
    const after = await postKey(proc, 'after');
    expect(after.status).toBe(201);
    acknowledged.push((after.body as { id: string }).id);
    expect((await readyzBecomes(proc, 200)).status).toBe(200);

    proc.child.kill('SIGKILL');
    await proc.exited;
    const revived = await spawnProduct(disk.dir);
    running.push(revived);
    expect(await keyIds(revived)).toEqual([...acknowledged].sort());
  });

  it('POST /admin/consumers: 201 and stored, or 503 with the Error body (never 500) and no consumer anywhere; /readyz names the consumers database', async () => {
    const consumersDisk = mountTmpfs('consumers-full', 2 * 1024 * 1024);
    try {
      const proc = await spawnProduct(consumersDisk.dir);
      running.push(proc);
      const postConsumer = (name: string) =>
        rawRequest(proc.adminUrl, {
          method: 'POST',
          path: '/admin/consumers',
          headers: { ...auth, 'Content-Type': 'application/json' },
          body: JSON.stringify({ name }),
        });
      const consumerIds = async () =>
        (
          (await rawRequest(proc.adminUrl, { method: 'GET', path: '/admin/consumers', headers: auth })).body as Array<{
            id: string;
          }>
        )
          .map((c) => c.id)
          .sort();
      const acknowledged = [((await postConsumer('before')).body as { id: string }).id];

      const filler = consumersDisk.fill();
      let refused = 0;
      for (let i = 0; i < 20; i += 1) {
        const res = await postConsumer(`full ${i} ${'n'.repeat(150)}`);
        if (res.status === 201) {
          acknowledged.push((res.body as { id: string }).id);
          continue;
        }
        expect({ status: res.status, body: res.body }).toEqual({
          status: 503,
          body: { code: 'service_unavailable', message: expect.any(String), status: 503 },
        });
        refused += 1;
      }
      expect(refused).toBeGreaterThan(0);
      expect(await consumerIds()).toEqual([...acknowledged].sort());
      const notReady = await readyzBecomes(proc, 503);
      expect(notReady.body).toMatchObject({ failing: expect.arrayContaining(['consumers database']) });

      fs.rmSync(filler);
      expect((await postConsumer('after')).status).toBe(201);
      proc.child.kill('SIGKILL');
      await proc.exited;
    } finally {
      consumersDisk.unmount();
    }
  });
});
