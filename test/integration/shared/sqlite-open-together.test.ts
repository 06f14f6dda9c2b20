import { execFile } from 'node:child_process';
import path from 'node:path';
import { useTempDirs } from '../../support/temp-dirs';

// A `WORKERS=2` start failed in a CI run with "cannot start: database is locked": the supervisor and
// its workers opened the same new SQLite file at the same moment, and switching a new file to WAL
// takes its exclusive lock without waiting for the busy timeout. Here four real processes open the
// same new files in step, through the product's one opener: every open succeeds, every file is WAL.
// (SQLite's own switch, not retried, was refused 92 times in 1,200 such opens on this machine.)

const { tempDir } = useTempDirs('asg-sqlite-together-');
const PROCESSES = 4;
const FILES = 150;
const STEP_MS = 15;

/** Opens `dir/<i>.db` at t0 + i × STEP_MS for each i, with the product's opener; prints what failed. */
const OPENER = `
const { openSqliteDatabase } = require('./src/shared/sqlite/sqlite-database.ts');
const [dir, t0, files, stepMs] = process.argv.slice(1).map((v, i) => (i === 0 ? v : Number(v)));
const failures = [];
let wal = 0;
for (let i = 0; i < files; i++) {
  while (Date.now() < t0 + i * stepMs);
  try {
    const db = openSqliteDatabase({
      file: dir + '/' + i + '.db',
      synchronous: 'NORMAL',
      migrations: [{ version: 1, description: 'a table', up: (d) => d.exec('CREATE TABLE IF NOT EXISTS t (a INTEGER)') }],
    });
    if (db.pragma('journal_mode', { simple: true }) === 'wal') wal++;
    db.close();
  } catch (err) {
    failures.push(i + ': ' + (err.code ?? '') + ' ' + err.message);
  }
}
process.stdout.write(JSON.stringify({ wal, failures }));
`;

function opener(dir: string, t0: number): Promise<{ wal: number; failures: string[] }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['-r', './test/support/ts-register.js', '-e', OPENER, dir, String(t0), String(FILES), String(STEP_MS)],
      { cwd: path.resolve(__dirname, '../../..') },
      (err, stdout, stderr) =>
        err
          ? reject(new Error(`${err.message}\n${stderr}`))
          : resolve(JSON.parse(stdout) as { wal: number; failures: string[] }),
    );
  });
}

// A hang guard: four process starts on a crowded machine.
jest.setTimeout(120_000);

test('processes opening the same new files at the same moment all open them, in WAL', async () => {
  const dir = tempDir();
  // In step from a moment after every process has started (a start takes about a second here).
  const t0 = Date.now() + 3000;
  const results = await Promise.all(Array.from({ length: PROCESSES }, () => opener(dir, t0)));
  expect(results.flatMap((r) => r.failures)).toEqual([]);
  expect(results.map((r) => r.wal)).toEqual(Array(PROCESSES).fill(FILES));
});
