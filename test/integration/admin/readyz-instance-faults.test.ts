import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { replicaFileName } from '../../../src/keys/durability/key-replica';
import { consumerReplicaFileName } from '../../../src/consumers/durable-consumer-store';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { freePort } from '../../support/redis-server';
import { mountTmpfs, type Tmpfs } from '../../support/tmpfs';
import { eventually } from '../../support/eventually';
import { useRedisPerFile } from '../../support/redis-per-file';
import { UsageSink } from '../../support/usage-sink';
import { USAGE_EVENTS_DIR } from '../../../src/product/usage-events';
import { WEBHOOK_OUTBOX_DATABASE_FILE } from '../../../src/notifications/sqlite-outbox';
import { USAGE_EVENT_STATE_FILE } from '../../../src/usage/events/sqlite-sent-state';

/**
 * CONTRACT §5, /readyz for this instance only: 503 for its own faults (a SQLite file it writes
 * refusing writes, shutting down); the inventory, the store and the circuit shown in the body with
 * 200. The write probe fails whenever a real write would: on a real file system filled to the last
 * byte, where rewriting a row in place (the old probe) still fitted while a new row did not.
 */

interface Readyz {
  status: number;
  body: {
    status?: string;
    failing?: string[];
    degraded?: string[];
    checks?: Record<string, string>;
    upstreamCircuit?: string;
  };
}

async function readyz(product: ProductHarness): Promise<Readyz> {
  const res = await fetch(`${product.adminUrl}/readyz`);
  return { status: res.status, body: (await res.json()) as Readyz['body'] };
}

const redis = useRedisPerFile();

/**
 * A second connection holds the file's write lock (BEGIN IMMEDIATE): the instance's writes to that
 * file alone are refused (SQLITE_BUSY past the busy timeout). /readyz turns 503 naming it, and 200
 * again by itself once the lock goes.
 */
async function expectReadyzFollowsLock(product: ProductHarness, name: string, file: string): Promise<void> {
  await eventually(async () => (await readyz(product)).status === 200, { what: '/readyz is 200 at first' });
  expect((await readyz(product)).body.checks![name]).toBe('ok');
  const holder = new Database(file);
  try {
    holder.exec('BEGIN IMMEDIATE');
    await eventually(async () => (await readyz(product)).status === 503, { what: `/readyz is 503 (${name})` });
    const notReady = await readyz(product);
    expect(notReady).toEqual({
      status: 503,
      body: expect.objectContaining({
        code: 'service_unavailable',
        message: expect.stringContaining(`${name} cannot take writes (`),
        status: 503,
        failing: [name],
      }),
    });
    expect(notReady.body.checks![name]).toMatch(/cannot take writes \(.*SQLITE_BUSY/);
    holder.exec('ROLLBACK');
  } finally {
    holder.close();
  }
  await eventually(async () => (await readyz(product)).status === 200, { what: `/readyz is 200 again (${name})` });
  expect((await readyz(product)).body.checks![name]).toBe('ok');
}

describe('/readyz', () => {
  it('stays 200 with the inventory down, showing it (and the circuit) in the body', async () => {
    const nobody = `http://127.0.0.1:${await freePort()}`;
    const product = await startTestProduct({
      overrides: {
        upstream: {
          url: nobody,
          circuitBreaker: {
            failureRatio: 0.5,
            minimumRequests: 1,
            windowMs: 60_000,
            cooldownMs: 60_000,
            halfOpenProbes: 1,
          },
        },
      },
    });
    try {
      const { key } = await product.keyService.create({ name: 'readyz', plan: 'free' });
      // Opens the circuit: the inventory refuses the connection.
      expect(
        (await fetch(`${product.gatewayUrl}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })).status,
      ).toBe(502);
      const ready = await readyz(product);
      expect(ready).toEqual({
        status: 200,
        body: expect.objectContaining({
          status: 'degraded',
          degraded: ['upstream'],
          upstreamCircuit: 'open',
          checks: expect.objectContaining({ store: 'ok', upstream: 'upstream not answering' }),
        }),
      });
    } finally {
      await product.close();
    }
  });

  describe('on a full disk (in process, the inventory in this process)', () => {
    let disk: Tmpfs;
    let product: ProductHarness;
    beforeAll(async () => {
      disk = mountTmpfs('readyz-full', 8 * 1024 * 1024);
      product = await startTestProduct({ redis: true, dataDir: disk.dir });
    });
    afterAll(async () => {
      await product?.close();
      disk?.unmount();
    });

    it('turns 503 naming the database when a new row cannot be written, and 200 again once space returns', async () => {
      const { key } = await product.keyService.create({
        name: 'full',
        plan: 'enterprise',
        limits: { perMinute: 1_000_000, perDay: 10_000_000 },
      });
      const post = () =>
        fetch(`${product.gatewayUrl}/v1/pets`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'R'.repeat(200), categoryId: 1 }),
        });
      expect((await readyz(product)).status).toBe(200);
      const filler = disk.fill();
      // Real writes fail once SQLite needs room the file system no longer has: at once, or once
      // the WAL it reuses after each checkpoint must grow (a checkpoint cannot grow the database
      // file). POST until the first 503, a bounded number of times; the probe must then say so too.
      const statuses = new Map<number, number>();
      for (let i = 0; i < 3000 && !statuses.has(503); i++) {
        const status = (await post()).status;
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
      // Every answer before it a 201: a write the database cannot make is a 503, never a 500.
      expect([...statuses.keys()].sort()).toEqual(statuses.has(201) ? [201, 503] : [503]);
      await eventually(async () => (await readyz(product)).status === 503, { timeoutMs: 5000, what: '/readyz is 503' });
      const notReady = await readyz(product);
      expect(notReady.body.failing).toEqual(expect.arrayContaining(['inventory database']));
      expect(notReady.body.checks!['inventory database']).toMatch(/cannot take writes \(.*SQLITE_FULL/);
      fs.rmSync(filler);
      await eventually(async () => (await readyz(product)).status === 200, {
        timeoutMs: 5000,
        what: '/readyz is 200 again',
      });
      expect((await post()).status).toBe(201);
    }, 180_000);
  });

  // With Redis the instance still writes SQLite under DATA_DIR: the durable copies of the key
  // records and of the consumers. A second connection holding a file's write lock refuses the
  // instance's writes to it (SQLITE_BUSY past the busy timeout) and to that file alone.
  describe('with Redis, the durable copies under DATA_DIR', () => {
    let product: ProductHarness;
    beforeAll(async () => {
      product = await startTestProduct({
        redisUrl: redis.url,
        dataDir: fs.mkdtempSync(path.join(os.tmpdir(), 'asg-readyz-copies-')),
      });
    });
    afterAll(async () => {
      await product?.close();
      if (product) fs.rmSync(product.dataDir, { recursive: true, force: true });
    });

    it.each([
      ['key copy database', replicaFileName],
      ['consumer copy database', consumerReplicaFileName],
    ])(
      '%s refusing writes: 503 with the Error body naming it, 200 again by itself once the lock goes',
      async (name, fileName) => {
        await expectReadyzFollowsLock(
          product,
          name,
          path.join(product.dataDir, fileName(product.config.redis.namespace)),
        );
      },
    );
  });

  // Without Redis, usage events wait in SQLite files of their own under DATA_DIR/usage-events/
  // (docs/storage.md): the instance writes them like its other files, so /readyz probes them too.
  describe('without Redis, with usage events on, the usage-events files', () => {
    const sink = new UsageSink();
    let product: ProductHarness;
    beforeAll(async () => {
      await sink.start();
      product = await startTestProduct({
        redis: false,
        overrides: {
          usageEvents: { enabled: true, url: sink.url, source: 'readyz', period: 'minute', graceSeconds: 15 },
        },
      });
    });
    afterAll(async () => {
      await product?.close();
      await sink.close();
    });

    it.each([
      ['usage-events outbox database', WEBHOOK_OUTBOX_DATABASE_FILE],
      ['usage-events state database', USAGE_EVENT_STATE_FILE],
    ])(
      '%s refusing writes: 503 with the Error body naming it, 200 again by itself once the lock goes',
      async (name, fileName) => {
        // The files open at the first tick of usage events (within a second of the start).
        await eventually(async () => (await readyz(product)).body.checks?.[name] !== undefined, {
          what: `/readyz lists ${name}`,
        });
        await expectReadyzFollowsLock(product, name, path.join(product.dataDir, USAGE_EVENTS_DIR, fileName));
      },
    );
  });

  it('usage events turned on by a reload add their files to /readyz; turned off by another, the files no longer decide readiness (nothing writes them)', async () => {
    const sink = new UsageSink();
    await sink.start();
    const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-readyz-reload-'));
    const configFile = path.join(configDir, 'extra.yaml');
    const usageEvents = (enabled: boolean) =>
      `usageEvents:\n  enabled: ${enabled}\n  url: ${sink.url}\n  source: readyz\n  period: minute\n  graceSeconds: 15\n`;
    fs.writeFileSync(configFile, usageEvents(false));
    const product = await startTestProduct({ redis: false, env: { CONFIG_FILE: configFile } });
    const outboxFile = path.join(product.dataDir, USAGE_EVENTS_DIR, WEBHOOK_OUTBOX_DATABASE_FILE);
    const usageChecks = async () =>
      Object.keys((await readyz(product)).body.checks!).filter((name) => name.startsWith('usage-events'));
    const reloadWith = async (enabled: boolean) => {
      fs.writeFileSync(configFile, usageEvents(enabled));
      const reloaded = await fetch(`${product.adminUrl}/admin/reload`, {
        method: 'POST',
        headers: { authorization: `Bearer ${product.adminToken}` },
      });
      expect(reloaded.status).toBe(200);
    };
    const holder = { db: null as Database.Database | null };
    try {
      expect(await usageChecks()).toEqual([]);
      await reloadWith(true);
      // The files open at the next tick of usage events (within a second).
      await eventually(async () => (await usageChecks()).length === 2, { what: '/readyz lists both files' });
      expect((await readyz(product)).status).toBe(200);
      await reloadWith(false);
      expect(await usageChecks()).toEqual([]);
      // The outbox file's write lock held: the instance, which no longer writes it, stays ready.
      holder.db = new Database(outboxFile);
      holder.db.exec('BEGIN IMMEDIATE');
      expect((await readyz(product)).status).toBe(200);
    } finally {
      holder.db?.close();
      await product.close();
      await sink.close();
      fs.rmSync(configDir, { recursive: true, force: true });
    }
  });

  it('lists no usage-events check with usage events off', async () => {
    const product = await startTestProduct({ redis: false });
    try {
      const names = Object.keys((await readyz(product)).body.checks!);
      expect(names.filter((n) => n.startsWith('usage-events'))).toEqual([]);
    } finally {
      await product.close();
    }
  });
});
