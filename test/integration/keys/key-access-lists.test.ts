import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { applyPatch, decodeRecord, encodeRecord } from '../../../src/keys/record-changes';
import { exportLine, parseExport } from '../../../src/keys/key-export';
import { SqliteKeyStore, KEYS_DATABASE_FILE } from '../../../src/keys/stores/sqlite-key-store';
import { keyRecordFixture } from '../../support/key-record';
import { newRecord } from './key-store-contract';

/**
 * A key's access lists (CONTRACT §4) kept by every form a record takes: the Redis JSON, the SQLite
 * row (across a reopen and on a database older than the lists), a patch, and a backup line.
 */

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-access-'));
  dirs.push(dir);
  return dir;
}

/** The import's rules: this environment's prefix, costs of 1, every plan known. */
const RULES = { prefix: 'asg_test_', largestCost: 1, check: () => null };

const lists = { allowedOperations: ['listPets'], allowedAddresses: ['10.0.0.0/8', '2001:db8::/32'] };

describe('key records with access lists', () => {
  it('encode and decode with their lists; a record without lists encodes as before lists existed', () => {
    const record = keyRecordFixture(lists);
    expect(decodeRecord(encodeRecord(record))).toEqual(record);
    expect(encodeRecord(keyRecordFixture())).not.toContain('allowed');
  });

  it('a patch replaces a list, null removes it, absent keeps it', () => {
    const record = keyRecordFixture(lists);
    const at = '2026-02-01T00:00:00.000Z';
    expect(applyPatch(record, { name: 'x' }, at)).toMatchObject(lists);
    const removed = applyPatch(record, { allowedOperations: null }, at);
    expect(removed).not.toHaveProperty('allowedOperations');
    expect(removed.allowedAddresses).toEqual(lists.allowedAddresses);
    expect(applyPatch(record, { allowedAddresses: ['192.0.2.1'] }, at).allowedAddresses).toEqual(['192.0.2.1']);
  });

  it('a backup line carries the lists, and a bad list in one refuses the import naming its line and entry', () => {
    const record = keyRecordFixture(lists);
    const line = exportLine(record, 'asg_test_');
    expect(parseExport(line, RULES)).toEqual([record]);
    const bad = JSON.stringify({ ...JSON.parse(line), allowedOperations: ['listPets', 'dropTables'] });
    expect(() => parseExport(`\n${bad}`, RULES)).toThrow(/line 2: .*"dropTables"/);
    expect(() => parseExport(JSON.stringify({ ...JSON.parse(line), allowedAddresses: [] }), RULES)).toThrow(/empty/);
  });
});

describe('SqliteKeyStore keeps access lists', () => {
  it('across updates and a close and reopen', async () => {
    const dataDir = tempDir();
    const first = new SqliteKeyStore({ dataDir });
    const withLists = newRecord(lists).record;
    const without = newRecord({ createdAt: '2026-01-02T00:00:00.000Z' }).record;
    await first.insert(withLists);
    await first.insert(without);
    await first.update(without.id, { allowedAddresses: ['192.0.2.0/24'] }, '2026-01-03T00:00:00.000Z');
    await first.update(withLists.id, { allowedOperations: null }, '2026-01-03T00:00:00.000Z');
    const before = await first.list();
    await first.close();

    const second = new SqliteKeyStore({ dataDir });
    try {
      expect(await second.list()).toEqual(before);
      const reopened = await second.get(withLists.id);
      expect(reopened).not.toHaveProperty('allowedOperations');
      expect(reopened?.allowedAddresses).toEqual(lists.allowedAddresses);
      expect((await second.get(without.id))?.allowedAddresses).toEqual(['192.0.2.0/24']);
    } finally {
      await second.close();
    }
  });

  it('opens a keys.sqlite written before access lists existed, its keys without lists', async () => {
    const dataDir = tempDir();
    const first = new SqliteKeyStore({ dataDir });
    const record = newRecord().record;
    await first.insert(record);
    await first.close();
    const db = new Database(path.join(dataDir, KEYS_DATABASE_FILE));
    // As the file was before migration 5: no access_policy column, user_version 4.
    db.exec('ALTER TABLE api_keys DROP COLUMN access_policy');
    db.pragma('user_version = 4');
    db.close();

    const second = new SqliteKeyStore({ dataDir });
    try {
      expect(await second.get(record.id)).toEqual(record);
      await second.update(record.id, { allowedOperations: ['getPet'] }, '2026-01-05T00:00:00.000Z');
      expect((await second.get(record.id))?.allowedOperations).toEqual(['getPet']);
    } finally {
      await second.close();
    }
  });
});
