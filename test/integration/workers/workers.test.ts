import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import Redis from 'ioredis';
import { freePort } from '../../support/redis-server';
import { useRedisPerFile } from '../../support/redis-per-file';
import {
  isolatedEnv,
  LONG_ADMIN_TOKEN,
  LONG_SIGNING_SECRET,
  START_HANG_GUARD_MS,
  startMain,
  tempFile,
  type MainProcess,
} from '../startup/startup-kit';
import { getThrough, heldAnswer, startFakeUpstream, type FakeUpstream } from '../startup/held-upstream';
import { eventually } from '../../support/eventually';
import { logLines as parseLogLines } from '../../support/log-lines';
import { createKey } from '../../support/keys';

/**
 * WORKERS (CONTRACT §2, §9): `src/main.ts` as `npm start` runs it, a supervisor and its workers as
 * real processes on a private redis-server, sharing both listeners.
 */

jest.setTimeout(180_000);

const redis = useRedisPerFile();
let observer: Redis;
const started: MainProcess[] = [];
const upstreams: FakeUpstream[] = [];
const dataDirs: string[] = [];

beforeAll(async () => {
  observer = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await observer.connect();
});

afterAll(async () => {
  observer.disconnect();
});

afterEach(async () => {
  for (const main of started.splice(0)) {
    if (main.child.exitCode === null && main.child.signalCode === null) main.child.kill('SIGKILL');
    await main.exited;
  }
  for (const upstream of upstreams.splice(0)) await upstream.close();
  for (const dir of dataDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

interface LogLine {
  msg: string;
  worker?: number;
  pid?: number;
  role?: string;
  [field: string]: unknown;
}

function logLines(main: MainProcess): LogLine[] {
  return parseLogLines(main.stdout()) as LogLine[];
}

interface RunningWorkers {
  main: MainProcess;
  gatewayUrl: string;
  adminUrl: string;
  env: Record<string, string>;
}

/** Starts the product with `workers` workers in staging (fixed secrets, no greeting), on the test's Redis. */
async function startWorkers(
  workers: string,
  extra: Record<string, string> = {},
  prefix: string[] = [],
): Promise<RunningWorkers> {
  const env = await isolatedEnv({
    APP_ENV: 'staging',
    ADMIN_TOKEN: LONG_ADMIN_TOKEN,
    SIGNING_SECRET: LONG_SIGNING_SECRET,
    REDIS_URL: redis.url,
    WORKERS: workers,
    // The private namespace keeps this test's keys apart from every other process on this Redis.
    // Exact shared counts need a store that answers: a 5 s command timeout, so a crowded machine's
    // stall is not taken for an outage (the local fallback would count per worker; store-outage tests cover it).
    CONFIG_FILE: tempFile(
      'workers.yaml',
      `redis:\n  namespace: "asg:workers:${process.pid}:${Date.now()}"\n  commandTimeoutMs: 5000\n`,
    ),
    ...extra,
  });
  dataDirs.push(env.DATA_DIR!);
  const main = startMain(env, { prefix });
  started.push(main);
  await main.waitForStdout(/"msg":"listening on Node v[\d.]+( with \d+ workers)?"/);
  return { main, gatewayUrl: `http://127.0.0.1:${env.PORT}`, adminUrl: `http://127.0.0.1:${env.ADMIN_PORT}`, env };
}

/** One GET on a fresh connection, so that the kernel spreads them over the workers (SO_REUSEPORT, by address hash). */
async function getOnNewConnection(url: string, key: string): Promise<number> {
  const outcome = await getThrough(false, url, '/v1/pets', key);
  return 'status' in outcome ? outcome.status : 0;
}

function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

async function scrape(adminUrl: string): Promise<string> {
  const res = await fetch(`${adminUrl}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}

/** Clients of the private Redis other than the observer: the processes under test. */
async function otherRedisClients(): Promise<number> {
  const list = (await observer.client('LIST')) as string;
  return list.trim().split('\n').length - 1;
}

test('WORKERS=2: both workers serve, /metrics answers once for the whole process, every worker a separate pid', async () => {
  const { main, gatewayUrl, adminUrl } = await startWorkers('2');
  const lines = logLines(main);
  expect(lines.find((line) => line.msg.startsWith('listening'))).toMatchObject({
    role: 'supervisor',
    workers: 2,
    node: process.version,
  });
  const ready = lines.filter((line) => line.msg === 'worker ready');
  expect(new Set(ready.map((line) => line.pid)).size).toBe(2);
  expect(ready.map((line) => line.pid)).not.toContain(main.child.pid);

  const { key } = await createKey(
    { adminUrl: adminUrl, adminToken: LONG_ADMIN_TOKEN },
    { name: 'spread', plan: 'enterprise', limits: { perMinute: 100_000, perDay: 1_000_000 } },
  );
  const statuses = await Promise.all(Array.from({ length: 40 }, () => getOnNewConnection(gatewayUrl, key)));
  expect(statuses).toEqual(Array(40).fill(200));

  // The request log lines name the worker that served each one: both did.
  await eventually(() => logLines(main).filter((line) => line.msg === 'request').length >= 40, {
    timeoutMs: START_HANG_GUARD_MS,
    what: '40 request lines',
  });
  const servedBy = new Set(
    logLines(main)
      .filter((line) => line.msg === 'request')
      .map((line) => line.worker),
  );
  expect([...servedBy].sort()).toEqual([1, 2]);

  // Whichever worker answers the scrape, the counts are the sum over both, every time.
  for (let i = 0; i < 4; i++) {
    const text = await scrape(adminUrl);
    expect(metricSum(text, 'gateway_http_requests_total', { route: '/v1/pets', status_code: '200' })).toBe(40);
    expect(metricSum(text, 'gateway_http_request_duration_seconds_count', { route: '/v1/pets' })).toBe(40);
    // The supervisor's embedded inventory is served beside the sum.
    expect(metricSum(text, 'inventory_http_requests_total', { route: '/v1/pets' })).toBe(40);
    // A gauge every worker reads from the shared store is not multiplied by the number of workers.
    expect(metricSum(text, 'gateway_store_degraded')).toBe(0);
    expect(text.match(/^# TYPE process_cpu_user_seconds_total /gm)).toHaveLength(1);
  }
});

test('WORKERS=2: limits are exact across the workers (80 concurrent requests, a day limit of 30)', async () => {
  const { gatewayUrl, adminUrl } = await startWorkers('2');
  const { key } = await createKey(
    { adminUrl: adminUrl, adminToken: LONG_ADMIN_TOKEN },
    { name: 'exact', plan: 'enterprise', limits: { perMinute: 100_000, perDay: 30 } },
  );
  const statuses = await Promise.all(Array.from({ length: 80 }, () => getOnNewConnection(gatewayUrl, key)));
  expect({
    admitted: statuses.filter((s) => s === 200).length,
    refused: statuses.filter((s) => s === 429).length,
  }).toEqual({ admitted: 30, refused: 50 });
});

test('a worker that dies is replaced and the product keeps serving', async () => {
  const { main, gatewayUrl, adminUrl } = await startWorkers('2');
  const { key } = await createKey(
    { adminUrl: adminUrl, adminToken: LONG_ADMIN_TOKEN },
    { name: 'survivor', plan: 'enterprise', limits: { perMinute: 100_000, perDay: 1_000_000 } },
  );
  const victim = logLines(main).find((line) => line.msg === 'worker ready')!;
  process.kill(victim.pid!, 'SIGKILL');

  await eventually(
    () => logLines(main).some((line) => line.msg === 'worker died: replacing it' && line.pid === victim.pid),
    { timeoutMs: START_HANG_GUARD_MS, what: 'the supervisor reports the death' },
  );
  await eventually(() => logLines(main).filter((line) => line.msg === 'worker ready').length === 3, {
    timeoutMs: START_HANG_GUARD_MS,
    what: 'a third worker is ready',
  });
  const replacement = logLines(main).filter((line) => line.msg === 'worker ready')[2]!;
  expect(replacement.pid).not.toBe(victim.pid);
  expect(main.child.exitCode).toBeNull();

  const statuses = await Promise.all(Array.from({ length: 20 }, () => getOnNewConnection(gatewayUrl, key)));
  expect(statuses).toEqual(Array(20).fill(200));
});

test('SIGTERM drains every worker: 4 requests in flight over both complete with their own bodies, Redis is closed, exit 0', async () => {
  const upstream = await startFakeUpstream();
  upstreams.push(upstream);
  const { main, gatewayUrl, adminUrl } = await startWorkers('2', { INVENTORY_URL: upstream.url });
  const { key } = await createKey(
    { adminUrl: adminUrl, adminToken: LONG_ADMIN_TOKEN },
    { name: 'drain', plan: 'enterprise', limits: { perMinute: 100_000, perDay: 1_000_000 } },
  );

  const paths = ['/v1/pets?limit=1', '/v1/pets?limit=2', '/v1/pets?limit=3', '/v1/pets?limit=4'];
  const outcomes = Promise.all(paths.map((p) => getThrough(false, gatewayUrl, p, key)));
  await upstream.waitForRequests(4);
  main.child.kill('SIGTERM');
  await eventually(
    () => logLines(main).filter((line) => line.msg === 'shutting down' && line.worker !== undefined).length === 2,
    { timeoutMs: START_HANG_GUARD_MS, what: 'both workers are shutting down' },
  );
  upstream.release();

  expect(await outcomes).toEqual(paths.map((p) => ({ status: 200, body: heldAnswer(p) })));
  expect(await main.exited).toBe(0);
  await eventually(async () => (await otherRedisClients()) === 0, {
    timeoutMs: START_HANG_GUARD_MS,
    what: 'no client of the product is left on Redis',
  });
});

test('a start that fails in every worker (Redis unreachable) prints one line, not one per worker, and exits non-zero', async () => {
  const closed = await freePort();
  const env = await isolatedEnv({
    APP_ENV: 'staging',
    ADMIN_TOKEN: LONG_ADMIN_TOKEN,
    SIGNING_SECRET: LONG_SIGNING_SECRET,
    REDIS_URL: `redis://127.0.0.1:${closed}`,
    WORKERS: '3',
  });
  dataDirs.push(env.DATA_DIR!);
  const main = startMain(env);
  started.push(main);
  expect(await main.exited).toBe(1);
  expect(main.stderr().trimEnd().split('\n')).toEqual([
    'animal-store-gateway: cannot start: Redis is unreachable (ECONNREFUSED); check REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS',
  ]);
});

describe('WORKERS=auto follows the CPUs this process may use', () => {
  beforeAll(() => {
    const probe = spawnSync('taskset', ['--version'], { encoding: 'utf8' });
    if (probe.error) throw new Error('these tests pin CPUs with taskset (Debian package util-linux): install it');
  });

  test('pinned to one CPU: no supervisor, one process', async () => {
    const { main } = await startWorkers('auto', {}, ['taskset', '-c', '0']);
    const listening = logLines(main).find((line) => line.msg.startsWith('listening'))!;
    expect(listening.role).toBeUndefined();
    expect(listening.msg).toBe(`listening on Node ${process.version}`);
  });

  test('pinned to two CPUs: a supervisor and two workers', async () => {
    const { main } = await startWorkers('auto', {}, ['taskset', '-c', '0,1']);
    expect(logLines(main).find((line) => line.msg.startsWith('listening'))).toMatchObject({
      role: 'supervisor',
      workers: 2,
    });
  });
});
