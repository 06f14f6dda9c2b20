import fs from 'node:fs';
import Redis from 'ioredis';
import { generateApiKey } from '../../../src/keys/key-format';
import { useRedisPerFile } from '../../support/redis-per-file';
import { LONG_ADMIN_TOKEN, startMain, twoWorkersEnv, tempFile, type MainProcess } from '../startup/startup-kit';
import { commandsExecuted, idleCommandsPerMs } from '../../support/redis-command-count';

/**
 * WORKERS=2 (CONTRACT §4, §9): each worker holds its own filter of issued keys. A key created
 * through the admin listener (answered by one worker) is served by whichever worker gets its
 * first request, and a flood of made-up keys costs the private redis-server almost nothing.
 */

jest.setTimeout(180_000);

const redis = useRedisPerFile();
let observer: Redis;
let main: MainProcess | null = null;
let dataDir: string | null = null;

beforeAll(async () => {
  observer = new Redis(redis.url, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  if (main && main.child.exitCode === null && main.child.signalCode === null) main.child.kill('SIGKILL');
  await main?.exited;
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  observer.disconnect();
});

test('WORKERS=2: 3,000 made-up keys cost Redis fewer than 150 commands (beyond the idle rate); keys created through the admin API are served at once by any worker', async () => {
  const env = await twoWorkersEnv(redis.url, {
    CONFIG_FILE: tempFile(
      'workers-unknown.yaml',
      `redis:\n  namespace: "asg:unknown:${process.pid}"\nanonymous:\n  perMinute: 30\n`,
    ),
  });
  dataDir = env.DATA_DIR!;
  main = startMain(env);
  await main.waitForStdout(/"msg":"listening on Node v[\d.]+ with 2 workers"/);
  const gatewayUrl = `http://127.0.0.1:${env.PORT}`;
  const adminUrl = `http://127.0.0.1:${env.ADMIN_PORT}`;

  // Fresh connections each time, so the kernel spreads the requests over both workers (SO_REUSEPORT, by address hash).
  const get = async (key: string) => {
    const res = await fetch(`${gatewayUrl}/v1/pets`, {
      headers: { authorization: `Bearer ${key}`, connection: 'close' },
    });
    await res.arrayBuffer();
    return res.status;
  };
  const idleRate = await idleCommandsPerMs(observer);
  const before = await commandsExecuted(observer);
  const startedAt = Date.now();
  const statuses: number[] = [];
  let sent = 0;
  await Promise.all(
    Array.from({ length: 200 }, async () => {
      while (sent < 3000) {
        sent++;
        const res = await fetch(`${gatewayUrl}/v1/pets`, {
          headers: { authorization: `Bearer ${generateApiKey('asg_test_')}` },
        });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
    }),
  );
  const commands = (await commandsExecuted(observer)) - before;
  const background = Math.ceil(idleRate * (Date.now() - startedAt));
  expect(statuses.filter((status) => status === 401 || status === 429)).toHaveLength(3000);
  // 30 a minute for the address: each UTC minute the requests ran in gives 30 more (a loaded machine takes several).
  const minutes = Math.floor(Date.now() / 60_000) - Math.floor(startedAt / 60_000) + 1;
  expect(statuses.filter((status) => status === 401).length).toBeLessThanOrEqual(30 * minutes);
  process.stdout.write(
    `WORKERS=2: ${commands} Redis commands for 3000 made-up keys (${background} of them the idle rate's)\n`,
  );
  expect(commands - background).toBeLessThan(150);

  const firstAnswers: number[] = [];
  for (let i = 0; i < 12; i++) {
    const res = await fetch(`${adminUrl}/admin/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${LONG_ADMIN_TOKEN}`, 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ name: `fresh ${i}`, plan: 'pro' }),
    });
    expect(res.status).toBe(201);
    const { key } = (await res.json()) as { key: string };
    firstAnswers.push(await get(key), await get(key));
  }
  expect(firstAnswers).toEqual(Array(24).fill(200));
});
