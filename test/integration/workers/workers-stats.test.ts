import fs from 'node:fs';
import { useRedisPerFile } from '../../support/redis-per-file';
import { LONG_ADMIN_TOKEN, startMain, twoWorkersEnv, tempFile, type MainProcess } from '../startup/startup-kit';
import { getThrough } from '../startup/held-upstream';
import { eventually } from '../../support/eventually';
import { logLinesWith } from '../../support/log-lines';

/** GET /admin/stats under WORKERS=2: whichever worker answers, the traffic of both, summed (as /metrics). */

jest.setTimeout(180_000);

const redis = useRedisPerFile();
let main: MainProcess | undefined;
let dataDir: string | undefined;

afterAll(async () => {
  if (main && main.child.exitCode === null && main.child.signalCode === null) main.child.kill('SIGKILL');
  await main?.exited;
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

const admin = { authorization: `Bearer ${LONG_ADMIN_TOKEN}` };

async function requestsCounted(adminUrl: string): Promise<number> {
  const res = await fetch(`${adminUrl}/admin/stats`, { headers: admin });
  expect(res.status).toBe(200);
  return ((await res.json()) as { totals: { requests: number } }).totals.requests;
}

test('WORKERS=2: /admin/stats sums the recent traffic of every worker, whichever one answers', async () => {
  const env = await twoWorkersEnv(redis.url, {
    CONFIG_FILE: tempFile(
      'workers-stats.yaml',
      `redis:\n  namespace: "asg:workers-stats:${process.pid}:${Date.now()}"\n`,
    ),
  });
  dataDir = env.DATA_DIR;
  main = startMain(env);
  await main.waitForStdout(/"msg":"listening on Node v[\d.]+ with 2 workers"/);
  const gatewayUrl = `http://127.0.0.1:${env.PORT}`;
  const adminUrl = `http://127.0.0.1:${env.ADMIN_PORT}`;

  const created = await fetch(`${adminUrl}/admin/keys`, {
    method: 'POST',
    headers: { ...admin, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'spread', plan: 'enterprise', limits: { perMinute: 100_000, perDay: 1_000_000 } }),
  });
  const { key } = (await created.json()) as { key: string };
  // Fresh connections, so that the kernel spreads them over both workers (SO_REUSEPORT, by address hash).
  const outcomes = await Promise.all(Array.from({ length: 40 }, () => getThrough(false, gatewayUrl, '/v1/pets', key)));
  expect(outcomes.map((o) => ('status' in o ? o.status : 0))).toEqual(Array(40).fill(200));
  const servedBy = () =>
    new Set(
      logLinesWith(main!.stdout(), { msg: 'request' })
        .map((line) => line.worker)
        .filter((worker) => worker !== undefined),
    );
  await eventually(() => servedBy().size === 2, { what: 'request lines from both workers', timeoutMs: 60_000 });
  expect([...servedBy()].sort()).toEqual([1, 2]);

  // Each worker samples its counters once a second; then every answer (from either worker) counts all 40.
  await eventually(async () => (await requestsCounted(adminUrl)) === 40, {
    what: 'all 40 requests counted',
    timeoutMs: 60_000,
    pollMs: 100,
  });
  const answers = [];
  for (let i = 0; i < 6; i++) answers.push(await requestsCounted(adminUrl));
  expect(answers).toEqual(Array(6).fill(40));
});
