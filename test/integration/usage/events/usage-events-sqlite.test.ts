import path from 'node:path';
import Database from 'better-sqlite3';
import { startMain, isolatedEnv, type MainProcess } from '../../startup/startup-kit';
import { MONTHS_DATABASE_FILE } from '../../../../src/limits/windows/sqlite-month-ledger';
import { UsageSink, type SinkMode } from '../../../support/usage-sink';
import { eventually } from '../../../support/eventually';
import {
  adminCall,
  keyMonthUsed,
  awayFromMidnight,
  configFile,
  COSTS,
  createKeys,
  expectSinkMatchesExport,
  nextPeriod,
  PERIODS,
  send,
  usageEventsBlock,
  type Admin,
  type ScenarioKey,
} from './usage-events-kit';

/**
 * Issue 53 item 3 in process (SQLite, no Redis): one instance, so no second one and no workers; it
 * is killed (SIGKILL) mid-period while the sink is down and events wait in its outbox, and started
 * again on the same DATA_DIR. The sink's sums equal the usage export per key and day and each
 * key's month window, exactly, with nothing counted twice after de-duplication. The day windows of
 * a process without Redis are in memory: the kill waits for the usage history's flush and the month
 * ledger's (units a killed process had not flushed are gone from the export too, docs/metering.md).
 * A consumer's month window is in memory only in process (not in months.sqlite): a restart starts
 * it again, so consumers' month windows are compared on Redis only.
 */

jest.setTimeout(300_000);

const ADMIN_TOKEN = 'sqlite-usage-events-admin-token-0123456789abcdef';
const sink = new UsageSink();
let main: MainProcess | null = null;

afterAll(async () => {
  main?.child.kill('SIGKILL');
  await sink.close();
});

function sinkModeIn(period: number): SinkMode {
  if (period >= 4 && period <= 6) return 'down';
  return period === 7 ? 'error' : 'up';
}

/**
 * The usage history has every admitted request the test saw answered (it flushes every 5 s), and
 * months.sqlite every unit the keys' month windows counted (written every second).
 */
async function flushed(
  admin: Admin,
  dataDir: string,
  keys: readonly ScenarioKey[],
  admitted: ReadonlyMap<string, number>,
): Promise<boolean> {
  let monthUnits = 0;
  for (const k of keys) {
    const res = await adminCall<{ days: Array<{ admitted: number }> }>(
      admin,
      'GET',
      `/admin/keys/${k.id}/usage?days=1`,
    );
    if (res.status !== 200 || res.body.days[0]!.admitted !== (admitted.get(k.id) ?? 0)) return false;
    monthUnits += await keyMonthUsed(admin, k.id);
  }
  const db = new Database(path.join(dataDir, MONTHS_DATABASE_FILE), { readonly: true });
  try {
    return (
      (db.prepare('SELECT coalesce(sum(count), 0) AS units FROM key_months').get() as { units: number }).units ===
      monthUnits
    );
  } finally {
    db.close();
  }
}

test("killed and restarted on its data dir: the sink sums what the usage export and the keys' month windows count, nothing twice", async () => {
  await sink.start();
  const env = await isolatedEnv({
    CONFIG_FILE: configFile({ costs: COSTS, usageEvents: usageEventsBlock(sink.url, 'scenario-sqlite') }),
    HOST: '127.0.0.1',
    ADMIN_TOKEN,
    SIGNING_SECRET: 'test-signing-secret-that-is-long-enough-0123456789',
  });
  main = startMain(env);
  await main.waitForStdout(/is ready on/);
  const admin: Admin = { url: `http://127.0.0.1:${env.ADMIN_PORT}`, token: ADMIN_TOKEN };
  const gateway = `http://127.0.0.1:${env.PORT}`;
  const { consumers, keys } = await createKeys(admin);
  await awayFromMidnight();
  const admitted = new Map<string, number>();
  let refusals = 0;
  await nextPeriod();
  for (let period = 0; period < PERIODS; period++) {
    sink.mode = sinkModeIn(period);
    for (const [j, k] of keys.entries()) {
      if (period === 5 && j === keys.length / 2) {
        // Mid-period, the sink down and events waiting in the outbox: killed once the history has the counts.
        await eventually(() => flushed(admin, env.DATA_DIR!, keys, admitted), {
          timeoutMs: 30_000,
          pollMs: 250,
          what: 'the usage history and month ledger flushed',
        });
        main.child.kill('SIGKILL');
        await main.exited;
        main = startMain(env);
        await main.waitForStdout(/is ready on/);
      }
      const requests: Array<'GET' | 'POST'> =
        j % 4 === 0 ? ['GET', 'GET', 'GET', 'GET'] : j % 3 === 0 ? ['GET', 'POST'] : ['POST'];
      for (const method of requests) {
        const status = await send(gateway, k.key, method);
        if (status < 300) admitted.set(k.id, (admitted.get(k.id) ?? 0) + 1);
        else if (status === 429) refusals += 1;
        else throw new Error(`unexpected status ${status}`);
      }
    }
    await nextPeriod();
  }
  sink.mode = 'up';
  expect(refusals).toBeGreaterThan(0);
  expect(sink.answered.dropped).toBeGreaterThan(0);
  expect(sink.answered.error).toBeGreaterThan(0);
  const lines = await expectSinkMatchesExport(sink, admin, consumers, false);
  // Every admitted request the test saw is in the export (the kill waited for the flush), and so in the sink.
  expect(Object.fromEntries(lines.map((l) => [l.keyId, l.admitted]))).toEqual(Object.fromEntries(admitted));
});
