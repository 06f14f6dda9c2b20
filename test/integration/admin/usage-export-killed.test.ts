import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startMain, isolatedEnv, type MainProcess } from '../startup/startup-kit';
import { uniqueNamespace, testRedisUrl } from '../../support/test-redis';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import { RedisKeyActivityStore } from '../../../src/usage/redis-key-activity-store';
import { dayOf } from '../../../src/usage/key-activity';
import { connectRedis } from '../../../src/shared/redis/redis';
import { adminRequest } from './admin-kit';

/**
 * Issue 40: an instance killed (SIGKILL) before it flushed its counts. The day window in Redis is
 * the truth: the export takes today's units from it, and the next request any instance flushes
 * carries the window's count into the history, so the day's units stay exact after the day too.
 */

jest.setTimeout(180_000);

const SIGNING_SECRET = 'test-signing-secret-that-is-long-enough-0123456789';
let survivor: ProductHarness;
let killed: MainProcess | null = null;
const namespace = uniqueNamespace('usage-killed');

beforeAll(async () => {
  survivor = await startTestProduct({ namespace });
});

afterAll(async () => {
  killed?.child.kill('SIGKILL');
  await survivor?.close();
});

/** The real clock decides the day here: a run that would straddle UTC midnight waits for it first. */
async function awayFromMidnight(): Promise<void> {
  const left = 86_400_000 - (Date.now() % 86_400_000);
  if (left < 60_000) await new Promise((resolve) => setTimeout(resolve, left + 100));
}

test("a worker killed mid-day with unflushed counts: the export's units still equal the day window's count", async () => {
  const configFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-killed-')), 'config.yaml');
  fs.writeFileSync(configFile, `redis:\n  namespace: "${namespace}"\n`);
  const env = await isolatedEnv({
    REDIS_URL: testRedisUrl(),
    CONFIG_FILE: configFile,
    HOST: '127.0.0.1',
    INVENTORY_URL: survivor.inventory!.url,
    SIGNING_SECRET,
    ADMIN_TOKEN: 'killed-instance-admin-token-0123456789abcdef',
    LOG_LEVEL: 'warn',
  });
  await awayFromMidnight();
  killed = startMain(env);
  await killed.waitForStdout(/is ready on/);
  const { key, record } = await survivor.keyService.create({
    name: 'served by the doomed',
    plan: 'free',
    limits: { perMinute: 100, perDay: 1000 },
  });
  for (let i = 0; i < 7; i++) {
    const res = await fetch(`http://127.0.0.1:${env.PORT}/v1/pets?limit=1`, {
      headers: { authorization: `Bearer ${key}` },
    });
    await res.arrayBuffer();
    expect(res.status).toBe(200);
  }
  // Killed at once: its counts (flushed every 5 s) never left it.
  killed.child.kill('SIGKILL');
  await killed.exited;
  killed = null;

  const today = new Date().toISOString().slice(0, 10);
  const exported = async () => {
    const res = await adminRequest(survivor, 'get', `/admin/usage/export?from=${today}&to=${today}`).expect(200);
    return (res.text as string)
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { keyId: string; units: number; admitted: number });
  };
  // The history has nothing of it (admitted is lost with the process); today's units come from the window.
  const line = (await exported()).find((l) => l.keyId === record.id);
  expect(line).toEqual(expect.objectContaining({ keyId: record.id, units: 7 }));
  expect(line!.admitted).toBeLessThanOrEqual(7);

  // One more request through the survivor: its decision reports the window's count (8), which its
  // flush stores as the day's highest count, so the day keeps 8 units once it is history too.
  const res = await fetch(`${survivor.gatewayUrl}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  expect((await exported()).find((l) => l.keyId === record.id)).toEqual(expect.objectContaining({ units: 8 }));
  const redis = await connectRedis({ url: testRedisUrl(), clusterNodes: [], commandTimeoutMs: 2000 });
  try {
    const [stored] = await new RedisKeyActivityStore(redis, namespace).usageDays(
      [record.id],
      dayOf(Date.now()),
      dayOf(Date.now()),
    );
    expect(stored).toEqual(expect.objectContaining({ dayCount: 8, units: 1 }));
  } finally {
    redis.disconnect();
  }
});
