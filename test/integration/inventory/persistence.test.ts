import fs from 'node:fs';
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
} from '../../support/inventory-harness';

/**
 * The standalone inventory (`src/inventory/main.ts`) as a real child process: a pet acknowledged
 * with 201 survives a clean restart and a SIGKILL in the middle of a stream of writes.
 */

const signer = tokenSigner(loadConfig({ env: {}, overrides: { signing: { secret: TEST_SIGNING_SECRET } } }));
const token = () => signer.sign({ keyId: 'persistence', plan: 'free' });

async function createPet(proc: InventoryProcess, name: string): Promise<Pet> {
  const res = await rawRequest(proc.url, {
    method: 'POST',
    path: '/v1/pets',
    headers: { 'Content-Type': 'application/json', [UPSTREAM_TOKEN_HEADER]: await token() },
    body: JSON.stringify({ name, categoryId: 7 }),
  });
  if (res.status !== 201) throw new Error(`expected 201, got ${res.status}: ${res.text}`);
  return res.body as Pet;
}

async function getPet(proc: InventoryProcess, id: number) {
  return rawRequest(proc.url, {
    method: 'GET',
    path: `/v1/pets/${id}`,
    headers: { [UPSTREAM_TOKEN_HEADER]: await token() },
  });
}

describe('inventory process: durability', () => {
  const dirs: string[] = [];
  const running: InventoryProcess[] = [];
  const newDataDir = () => {
    const dir = makeTempDir('inventory-proc');
    dirs.push(dir);
    return dir;
  };
  const spawnOn = async (dataDir: string) => {
    const proc = await spawnInventoryProcess({ dataDir });
    running.push(proc);
    return proc;
  };

  afterAll(async () => {
    for (const proc of running) await stopInventoryProcess(proc, 'SIGKILL');
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('keeps every pet across a clean restart (SIGTERM exits 0) and never reuses an id', async () => {
    const dataDir = newDataDir();
    const first = await spawnOn(dataDir);
    const created: Pet[] = [];
    for (let i = 0; i < 5; i += 1) created.push(await createPet(first, `Calm ${i}`));
    expect(await stopInventoryProcess(first, 'SIGTERM')).toEqual({ code: 0, signal: null });

    const second = await spawnOn(dataDir);
    for (const pet of created) expect((await getPet(second, pet.id)).body).toEqual(pet);
    const next = await createPet(second, 'After restart');
    expect(next.id).toBe(Math.max(...created.map((p) => p.id)) + 1);
    expect(await stopInventoryProcess(second, 'SIGINT')).toEqual({ code: 0, signal: null });
  });

  it('keeps every acknowledged pet when the process is SIGKILLed during a stream of POSTs', async () => {
    const dataDir = newDataDir();
    const victim = await spawnOn(dataDir);
    const acknowledged: Pet[] = [];
    let failures = 0;
    let stop = false;

    // Four clients writing in a loop; each records only what was answered with 201.
    const writer = async (w: number) => {
      for (let i = 0; !stop; i += 1) {
        try {
          acknowledged.push(await createPet(victim, `Writer ${w} #${i}`));
        } catch {
          failures += 1;
          return;
        }
      }
    };
    const writers = [0, 1, 2, 3].map(writer);
    while (acknowledged.length < 60) await new Promise((resolve) => setTimeout(resolve, 5));
    victim.child.kill('SIGKILL');
    const exit = await victim.exited;
    stop = true;
    await Promise.all(writers);
    expect(exit.signal).toBe('SIGKILL');
    // The kill landed mid-stream: writers were cut off, not stopped politely.
    expect(failures).toBeGreaterThan(0);

    const revived = await spawnOn(dataDir);
    const missing: number[] = [];
    for (const pet of acknowledged) {
      const res = await getPet(revived, pet.id);
      if (res.status !== 200 || JSON.stringify(res.body) !== JSON.stringify(pet)) missing.push(pet.id);
    }
    expect({ acknowledged: acknowledged.length, missing }).toEqual({ acknowledged: acknowledged.length, missing: [] });
    const maxAcknowledged = Math.max(...acknowledged.map((p) => p.id));
    expect((await createPet(revived, 'After crash')).id).toBeGreaterThan(maxAcknowledged);
  });

  it('a bad setting stops startup with one line naming it, exit code 1 and no stack trace', async () => {
    const proc = await spawnInventoryProcess({
      dataDir: newDataDir(),
      env: { SIGNING_SECRET: 'too-short' },
      waitUntilReady: false,
    });
    const exit = await proc.exited;
    expect(exit.code).toBe(1);
    const lines = proc.stderr().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/SIGNING_SECRET/);
    expect(proc.stderr()).not.toMatch(/\n\s+at /);
  });
});
