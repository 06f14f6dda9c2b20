import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { loadConfig } from '../../../src/shared/config';
import type { Pet } from '../../../src/inventory/pet';
import { UPSTREAM_TOKEN_HEADER } from '../../../src/shared/http/upstream-token';
import {
  TEST_SIGNING_SECRET,
  makeTempDir,
  rawRequest,
  spawnInventoryProcess,
  stopInventoryProcess,
  tokenSigner,
  type InventoryProcess,
  type RawResponse,
} from '../../support/inventory-harness';
import { mountTmpfs, type Tmpfs } from '../../support/tmpfs';
import { eventually } from '../../support/eventually';

/**
 * The standalone inventory (src/inventory/main.ts, a real child process) on a disk that cannot take
 * writes: a tmpfs filled to the last byte, and a second connection holding the write lock past the
 * busy timeout; a read-only remount. Every POST is 201 and stored, or 503 with the Error body and Retry-After; /readyz
 * says why and turns ready by itself; after a SIGKILL and a restart the database holds exactly the
 * acknowledged pets, each id once (issue 32, CONTRACT §7).
 */

const signer = tokenSigner(loadConfig({ env: {}, overrides: { signing: { secret: TEST_SIGNING_SECRET } } }));
const token = () => signer.sign({ keyId: 'failing-disk', plan: 'free' });
const BUSY_TIMEOUT_MS = 200;

async function postPet(proc: InventoryProcess, name: string): Promise<RawResponse> {
  return rawRequest(proc.url, {
    method: 'POST',
    path: '/v1/pets',
    headers: { 'Content-Type': 'application/json', [UPSTREAM_TOKEN_HEADER]: await token() },
    body: JSON.stringify({ name, categoryId: 3 }),
  });
}

/** POSTs `count` pets one after another; each answer must be 201 with the pet or 503 with the Error body. */
async function postMany(
  proc: InventoryProcess,
  prefix: string,
  count: number,
): Promise<{ stored: Pet[]; refused: number }> {
  const stored: Pet[] = [];
  let refused = 0;
  for (let i = 0; i < count; i += 1) {
    const name = `${prefix} ${i} ${'x'.repeat(150)}`;
    const res = await postPet(proc, name);
    if (res.status === 201) {
      expect(res.body).toEqual({ id: expect.any(Number), name, categoryId: 3, status: 'available' });
      stored.push(res.body as Pet);
    } else {
      expect({ status: res.status, body: res.body }).toEqual({
        status: 503,
        body: { code: 'service_unavailable', message: expect.any(String), status: 503 },
      });
      expect(res.headers['retry-after']).toBe('5');
      refused += 1;
    }
  }
  return { stored, refused };
}

async function readyz(proc: InventoryProcess): Promise<RawResponse> {
  return rawRequest(proc.url, { method: 'GET', path: '/readyz' });
}

/** /readyz answers a probe at most once a second, so a change shows within a short window. */
async function readyzBecomes(proc: InventoryProcess, status: number): Promise<RawResponse> {
  let last: RawResponse | undefined;
  await eventually(async () => (last = await readyz(proc)).status === status, {
    pollMs: 100,
    what: () => `/readyz ${status} (last ${last?.status}: ${JSON.stringify(last?.body)})`,
  });
  return last!;
}

/** Every row of the pets table, through a read-only connection of the test's own. */
function storedPets(dataDir: string): Pet[] {
  const db = new Database(path.join(dataDir, 'inventory.sqlite'), { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT id, name, category_id AS categoryId, status FROM pets ORDER BY id').all() as Pet[];
  } finally {
    db.close();
  }
}

/** SIGKILL, restart on the same data dir, and the database holds exactly `acknowledged`, each id once. */
async function expectExactlyAfterCrash(
  proc: InventoryProcess,
  dataDir: string,
  acknowledged: Pet[],
  env: Record<string, string>,
): Promise<InventoryProcess> {
  proc.child.kill('SIGKILL');
  expect((await proc.exited).signal).toBe('SIGKILL');
  const revived = await spawnInventoryProcess({ dataDir, env });
  const byId = (a: Pet, b: Pet) => a.id - b.id;
  expect(storedPets(dataDir)).toEqual([...acknowledged].sort(byId));
  expect(new Set(acknowledged.map((p) => p.id)).size).toBe(acknowledged.length);
  const last = acknowledged.at(-1)!;
  const res = await rawRequest(revived.url, {
    method: 'GET',
    path: `/v1/pets/${last.id}`,
    headers: { [UPSTREAM_TOKEN_HEADER]: await token() },
  });
  expect(res.body).toEqual(last);
  return revived;
}

describe('standalone inventory on a failing disk', () => {
  const running: InventoryProcess[] = [];
  const mounts: Tmpfs[] = [];
  const dirs: string[] = [];

  afterAll(async () => {
    for (const proc of running) await stopInventoryProcess(proc, 'SIGKILL');
    for (const mount of mounts) mount.unmount();
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('disk full: each POST is 201 and stored or 503; /readyz names SQLITE_FULL; writes resume when space returns; a crash keeps exactly the 201s', async () => {
    const disk = mountTmpfs('inventory-full', 2 * 1024 * 1024);
    mounts.push(disk);
    const env = { SQLITE_BUSY_TIMEOUT_MS: String(BUSY_TIMEOUT_MS) };
    const proc = await spawnInventoryProcess({ dataDir: disk.dir, env });
    running.push(proc);

    const before = await postMany(proc, 'Before', 5);
    expect(before.refused).toBe(0);
    const filler = disk.fill();
    expect(disk.freeBytes()).toBe(0);

    const full = await postMany(proc, 'Full', 40);
    expect(full.refused).toBeGreaterThan(0);
    const notReady = await readyzBecomes(proc, 503);
    expect(notReady.status).toBe(503);
    expect(notReady.body).toMatchObject({
      code: 'service_unavailable',
      status: 503,
      message: expect.stringContaining('SQLITE_FULL'),
    });
    const metrics = (await rawRequest(proc.url, { method: 'GET', path: '/metrics' })).text;
    expect(metrics).toMatch(/^inventory_sqlite_errors_total\{statement="insert_pet",code="SQLITE_FULL"\} [1-9]\d*$/m);
    // Reads go on while writes cannot.
    expect(
      (
        await rawRequest(proc.url, {
          method: 'GET',
          path: `/v1/pets/${before.stored[0]!.id}`,
          headers: { [UPSTREAM_TOKEN_HEADER]: await token() },
        })
      ).status,
    ).toBe(200);

    fs.rmSync(filler);
    const after = await postMany(proc, 'After', 3);
    expect(after.refused).toBe(0);
    expect((await readyzBecomes(proc, 200)).status).toBe(200);

    const acknowledged = [...before.stored, ...full.stored, ...after.stored];
    // No id handed out twice, and every id after the outage beyond every id acknowledged before it.
    expect(Math.min(...after.stored.map((p) => p.id))).toBeGreaterThan(
      Math.max(...before.stored.map((p) => p.id), ...full.stored.map((p) => p.id)),
    );
    running.push(await expectExactlyAfterCrash(proc, disk.dir, acknowledged, env));
  });

  it('read-only remount: startup refuses with one line naming DATA_DIR; remounted read-write, exactly the acknowledged pets', async () => {
    const disk = mountTmpfs('inventory-ro', 2 * 1024 * 1024);
    mounts.push(disk);
    const proc = await spawnInventoryProcess({ dataDir: disk.dir });
    running.push(proc);
    const before = await postMany(proc, 'Writable', 4);
    expect(before.refused).toBe(0);
    // Linux refuses a read-only remount while a process holds a file open for writing: crash it first.
    proc.child.kill('SIGKILL');
    await proc.exited;
    disk.remount('ro');

    const refused = await spawnInventoryProcess({ dataDir: disk.dir, waitUntilReady: false });
    running.push(refused);
    expect((await refused.exited).code).toBe(1);
    expect(refused.stderr().trim().split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^DATA_DIR ${disk.dir} is on a read-only file system`)),
    ]);

    disk.remount('rw');
    const revived = await spawnInventoryProcess({ dataDir: disk.dir });
    running.push(revived);
    const after = await postMany(revived, 'Writable again', 2);
    expect(after.refused).toBe(0);
    running.push(await expectExactlyAfterCrash(revived, disk.dir, [...before.stored, ...after.stored], {}));
  });

  it('a second connection holding the write lock past the busy timeout: 503, then 201 once it lets go; a crash keeps exactly the 201s', async () => {
    const dataDir = makeTempDir('inventory-busy');
    dirs.push(dataDir);
    const env = { SQLITE_BUSY_TIMEOUT_MS: String(BUSY_TIMEOUT_MS) };
    const proc = await spawnInventoryProcess({ dataDir, env });
    running.push(proc);
    const before = await postMany(proc, 'Unlocked', 3);

    const holder = new Database(path.join(dataDir, 'inventory.sqlite'));
    try {
      holder.exec('BEGIN IMMEDIATE');
      const startedAt = Date.now();
      const locked = await postMany(proc, 'Locked', 3);
      expect(locked).toEqual({ stored: [], refused: 3 });
      // Each waited the busy timeout before giving up, no longer than a few times it.
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(3 * BUSY_TIMEOUT_MS);
      const notReady = await readyzBecomes(proc, 503);
      expect(notReady.body).toMatchObject({ message: expect.stringContaining('SQLITE_BUSY') });
      holder.exec('ROLLBACK');
    } finally {
      holder.close();
    }
    const after = await postMany(proc, 'Released', 3);
    expect(after.refused).toBe(0);
    expect((await readyzBecomes(proc, 200)).status).toBe(200);
    running.push(await expectExactlyAfterCrash(proc, dataDir, [...before.stored, ...after.stored], env));
  });
});
