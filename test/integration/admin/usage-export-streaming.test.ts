import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { SqliteKeyStore } from '../../../src/keys';
import { dayOf, USAGE_EXPORT_DAYS } from '../../../src/usage/key-activity';
import { KEY_USAGE_DATABASE_FILE, SqliteKeyActivityStore } from '../../../src/usage/sqlite-key-activity-store';
import { keyRecordFixture } from '../../support/key-record';
import { isolatedEnv, startMain, type MainProcess } from '../startup/startup-kit';

/**
 * Issue 40: the usage export streams. A million lines (2,500 keys with traffic on each of 400
 * days) come out of a gateway process whose old generation is capped far below their size (about
 * 125 MB of text, more as strings): a gateway that held them would die of it. Its peak RSS (VmHWM)
 * is measured before and after.
 */

jest.setTimeout(180_000);

const KEYS = 2500;
const MB = 1024 * 1024;
const ADMIN_TOKEN = 'streaming-admin-token-0123456789abcdef-long';
/**
 * The gateway's heap: an old generation of 64 MB and semi-spaces of 8 MB, enough to run and far
 * less than the export's lines would take. (Left to itself V8 grows its young generation to some
 * 100 MB under this allocation rate, which would blur what the export itself holds.)
 */
const HEAP_FLAGS = ['--max-old-space-size=64', '--max-semi-space-size=8'];
let main: MainProcess;
let adminUrl: string;
let today: number;

/** Peak resident memory of a process so far (Linux VmHWM), in bytes. */
function peakRss(pid: number): number {
  const line = fs
    .readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmHWM:'))!;
  return Number(line.replace(/\D/g, '')) * 1024;
}

beforeAll(async () => {
  const env = await isolatedEnv({ ADMIN_TOKEN, HOST: '127.0.0.1', LOG_LEVEL: 'warn' });
  const dataDir = env.DATA_DIR!;
  const keys = new SqliteKeyStore({ dataDir });
  const ids = Array.from({ length: KEYS }, (_, i) => `key_${i.toString(16).padStart(24, '0')}`);
  await keys.importRecords(
    ids.map((id, i) => keyRecordFixture({ id, name: `key ${i}`, hash: i.toString(16).padStart(64, '0') })),
  );
  await keys.close();
  // The history's file as the gateway makes it, filled in its key order in one transaction: through
  // the store, a day at a time, 400 days of 2,500 keys would take minutes of random page writes.
  new SqliteKeyActivityStore(dataDir).close();
  const db = new Database(path.join(dataDir, KEY_USAGE_DATABASE_FILE));
  today = dayOf(Date.now());
  const insert = db.prepare(
    'INSERT INTO key_usage (key_id, day, admitted, rate_limited, banned, units, day_count) VALUES (?, ?, ?, 1, 0, ?, ?)',
  );
  db.transaction(() => {
    for (const [i, id] of ids.entries())
      for (let day = today - USAGE_EXPORT_DAYS + 1; day <= today; day++)
        insert.run(id, day, 10 + (i % 7), 12 + (i % 7), 12 + (i % 7));
  })();
  db.close();

  main = startMain(env, { nodeArgs: HEAP_FLAGS });
  await main.waitForStdout(/is ready on/);
  adminUrl = `http://127.0.0.1:${env.ADMIN_PORT}`;
});

afterAll(async () => {
  main?.child.kill('SIGKILL');
  await main?.exited;
});

test('a million lines stream out of a gateway whose heap is capped below their size', async () => {
  const dayMs = 86_400_000;
  const to = new Date(today * dayMs).toISOString().slice(0, 10);
  const from = new Date((today - USAGE_EXPORT_DAYS + 1) * dayMs).toISOString().slice(0, 10);
  const before = peakRss(main.child.pid!);
  const startedAt = Date.now();
  let firstChunkAt = 0;
  let lines = 0;
  let bytes = 0;
  let tail = '';
  const res = await fetch(`${adminUrl}/admin/usage/export?from=${from}&to=${to}`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('transfer-encoding')).toBe('chunked');
  const decoder = new TextDecoder();
  for await (const chunk of res.body!) {
    firstChunkAt ||= Date.now();
    bytes += chunk.byteLength;
    const text = decoder.decode(chunk, { stream: true });
    for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) lines++;
    tail = (tail + text).slice(-300);
  }
  const tookMs = Date.now() - startedAt;
  const grew = peakRss(main.child.pid!) - before;
  console.log(
    `usage export: ${lines} lines, ${Math.round(bytes / MB)} MB in ${tookMs} ms (first bytes after ${firstChunkAt - startedAt} ms); gateway peak RSS ${Math.round(before / MB)} MB before, +${Math.round(grew / MB)} MB during`,
  );
  expect(lines).toBe(KEYS * USAGE_EXPORT_DAYS);
  expect(JSON.parse(tail.trimEnd().split('\n').pop()!)).toEqual({
    date: to,
    keyId: `key_${(KEYS - 1).toString(16).padStart(24, '0')}`,
    consumerId: null,
    admitted: 10 + ((KEYS - 1) % 7),
    units: 12 + ((KEYS - 1) % 7),
    rateLimited: 1,
    banned: 0,
  });
  // The process lived through it: a million lines as strings (some 150 MB) cannot have sat in its
  // heap. Its resident memory grew by what its heap may fill between collections (the caps, 88 MB
  // in all) at most, never by the text it sent.
  expect(main.child.exitCode).toBeNull();
  expect(grew).toBeLessThan(Math.min(100 * MB, bytes));
  // The first lines left long before the last were read.
  expect(firstChunkAt - startedAt).toBeLessThan(tookMs / 4);
});
