import http from 'node:http';
import net from 'node:net';
import { freePort } from '../../support/redis-server';
import { useRedisPerFile } from '../../support/redis-per-file';
import {
  LONG_ADMIN_TOKEN,
  START_HANG_GUARD_MS,
  runMain,
  startMain,
  tempFile,
  twoWorkersEnv,
  type MainProcess,
} from '../startup/startup-kit';
import { eventually } from '../../support/eventually';
import { logLines } from '../../support/log-lines';
import { createKey } from '../../support/keys';

/**
 * The decision listener under WORKERS=2 (CONTRACT §9, §11): `src/main.ts` as `npm start` runs it,
 * every worker listening on AUTHZ_PORT with its own socket, the supervisor checking the port first.
 */

jest.setTimeout(180_000);

const redis = useRedisPerFile();
const started: MainProcess[] = [];

afterAll(async () => {
  for (const main of started) {
    if (main.child.exitCode === null && main.child.signalCode === null) main.child.kill('SIGKILL');
    await main.exited;
  }
});

/** Two workers on the suite's Redis, trusting 127.0.0.1 as a proxy, the decision listener on `authzPort`. */
async function twoWorkersWithAuthz(authzPort: number): Promise<Record<string, string>> {
  // Exact shared counts need a store that answers: a 5 s command timeout, so a crowded machine's stall is not taken for an outage.
  const config = `redis:\n  namespace: "asg:authz-workers:${process.pid}:${Date.now()}"\n  commandTimeoutMs: 5000\nserver:\n  trustedProxies: ["127.0.0.1"]\nplans:\n  one-at-a-time: { perMinute: 100, perDay: 1000, maxInFlight: 1 }\n`;
  return twoWorkersEnv(redis.url, {
    AUTHZ_PORT: String(authzPort),
    CONFIG_FILE: tempFile('authz-workers.yaml', config),
  });
}

/** One decision NGINX-style on a fresh connection, so that the kernel spreads them over the workers' sockets. */
function askOnNewConnection(authzUrl: string, key: string): Promise<{ status: number; decided: string | undefined }> {
  return new Promise((resolve, reject) => {
    const headers = { authorization: `Bearer ${key}`, 'x-original-method': 'GET', 'x-original-uri': '/v1/pets' };
    const req = http.get(`${authzUrl}/_authz`, { agent: false, headers }, (res) => {
      res.resume();
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, decided: res.headers['x-authz-status'] as string | undefined }),
      );
    });
    req.on('error', reject);
  });
}

test('WORKERS=2: both workers decide, exactly (80 concurrent decisions, a day limit of 30), and each says maxInFlight is not enforced', async () => {
  const env = await twoWorkersWithAuthz(await freePort());
  const main = startMain(env);
  started.push(main);
  await main.waitForStdout(/"msg":"listening on Node v[\d.]+( with \d+ workers)?"/);
  const authzUrl = `http://127.0.0.1:${env.AUTHZ_PORT}`;
  const { key } = await createKey(
    { adminUrl: `http://127.0.0.1:${env.ADMIN_PORT}`, adminToken: LONG_ADMIN_TOKEN },
    { name: 'decided', plan: 'enterprise', limits: { perMinute: 100_000, perDay: 30 } },
  );

  const answers = await Promise.all(Array.from({ length: 80 }, () => askOnNewConnection(authzUrl, key)));
  expect({
    allowed: answers.filter((a) => a.status === 200).length,
    refused: answers.filter((a) => a.decided === '429').length,
  }).toEqual({ allowed: 30, refused: 50 });

  const lines = () => logLines(main.stdout()) as Array<{ msg: string; worker?: number; plans?: string[] }>;
  await eventually(() => lines().filter((line) => line.msg === 'authz decision').length >= 80, {
    timeoutMs: START_HANG_GUARD_MS,
    what: '80 decision lines',
  });
  expect(
    [
      ...new Set(
        lines()
          .filter((line) => line.msg === 'authz decision')
          .map((line) => line.worker),
      ),
    ].sort(),
  ).toEqual([1, 2]);
  const warnings = lines().filter((line) => line.msg.includes('does not enforce maxInFlight'));
  expect(warnings.map((line) => [line.worker, line.plans]).sort()).toEqual([
    [1, ['one-at-a-time']],
    [2, ['one-at-a-time']],
  ]);
});

test('AUTHZ_PORT already in use stops startup with one line and a non-zero exit, as the other ports do', async () => {
  // Held as another gateway's workers would hold it (SO_REUSEPORT), which the workers' own sockets
  // would quietly share: only the supervisor's plain bind first finds it taken.
  const occupier = net.createServer();
  const port = await freePort();
  await new Promise<void>((resolve) => occupier.listen({ port, host: '0.0.0.0', reusePort: true }, resolve));
  try {
    const { code, stderr } = await runMain(await twoWorkersWithAuthz(port));
    expect(code).not.toBe(0);
    expect(code).not.toBeNull();
    const lines = stderr.trimEnd().split('\n');
    expect(lines).toEqual([
      expect.stringMatching(/^animal-store-gateway: cannot start: a port is already in use .*EADDRINUSE/),
    ]);
  } finally {
    await new Promise((resolve) => occupier.close(resolve));
  }
});
