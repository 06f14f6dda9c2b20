import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import { useRedisPerFile } from '../../support/redis-per-file';
import { makeTestCertificates, type TestCertificates } from '../../support/tls-certs';
import { LONG_ADMIN_TOKEN, startMain, tempFile, twoWorkersEnv, type MainProcess } from '../startup/startup-kit';
import { seriesOf } from '../observability/series';

/**
 * Issue 42 (high 4) under WORKERS=2: /metrics is the sum of every worker's registry and the
 * supervisor's own (the inventory, the reloads). Each is closed, so the sum is: distinct HTTP/2
 * methods on sessions spread over both workers, and distinct methods straight to the supervisor's
 * inventory, add no series to the summed scrape.
 */
jest.setTimeout(180_000);

const redis = useRedisPerFile();
let certs: TestCertificates;
let main: MainProcess | undefined;
let dataDir: string | undefined;

beforeAll(async () => {
  certs = makeTestCertificates();
});
afterAll(async () => {
  if (main && main.child.exitCode === null && main.child.signalCode === null) main.child.kill('SIGKILL');
  await main?.exited;
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

function h2Session(url: string): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url, { ca: fs.readFileSync(certs.caCert) });
    session.on('error', () => undefined);
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

function h2Status(session: http2.ClientHttp2Session, method: string): Promise<number> {
  return new Promise((resolve) => {
    const stream = session.request({ ':method': method, ':path': '/v1/pets' });
    let status = 0;
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.on('error', () => resolve(0));
    stream.on('close', () => resolve(status));
    stream.resume();
  });
}

function plainStatus(url: string, method: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(url, { method, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

/** `perSession` distinct methods on each of `sessions` new sessions (new connections: both workers get some). */
async function distinctMethods(
  gatewayUrl: string,
  round: string,
  sessions: number,
  perSession: number,
): Promise<number[]> {
  const statuses: number[] = [];
  await Promise.all(
    Array.from({ length: sessions }, async (_, s) => {
      const session = await h2Session(gatewayUrl);
      for (let start = 0; start < perSession; start += 50) {
        const batch = Array.from({ length: Math.min(50, perSession - start) }, (_, i) =>
          h2Status(session, `X${round}S${s}N${start + i}`),
        );
        statuses.push(...(await Promise.all(batch)));
      }
      session.close();
    }),
  );
  return statuses;
}

test('WORKERS=2: distinct HTTP/2 methods over both workers and distinct methods to the inventory add no series to the summed /metrics', async () => {
  const env = await twoWorkersEnv(redis.url, {
    TLS_CERT_FILE: certs.serverCert,
    TLS_KEY_FILE: certs.serverKey,
    // Redis answering is this test's premise: 2 s commands (the 200 ms default timed out the start at load 20).
    CONFIG_FILE: tempFile(
      'workers-labels.yaml',
      `redis:\n  namespace: "asg:workers-labels:${process.pid}:${Date.now()}"\n  commandTimeoutMs: 2000\nanonymous:\n  perMinute: 1000000\n`,
    ),
  });
  dataDir = env.DATA_DIR;
  main = startMain(env);
  await main.waitForStdout(/"msg":"listening on Node v[\d.]+ with 2 workers"/);
  const gatewayUrl = `https://127.0.0.1:${env.PORT}`;
  const adminUrl = `http://127.0.0.1:${env.ADMIN_PORT}`;
  const inventoryUrl = `http://127.0.0.1:${env.INVENTORY_PORT}/v1/pets`;
  const scrape = async () => {
    const res = await fetch(`${adminUrl}/metrics`, { headers: { authorization: `Bearer ${LONG_ADMIN_TOKEN}` } });
    expect(res.status).toBe(200);
    return seriesOf(await res.text());
  };

  // Warm-up: the closed sets' series (`other` for the method) on every worker and on the inventory.
  expect(new Set(await distinctMethods(gatewayUrl, 'a', 6, 2))).toEqual(new Set([401]));
  const warmUpMethods = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'PROPFIND'];
  for (const method of warmUpMethods) await plainStatus(inventoryUrl, method);
  const before = new Set((await scrape()).map((s) => s.id));

  expect(new Set(await distinctMethods(gatewayUrl, 'b', 6, 250))).toEqual(new Set([401]));
  for (const method of http.METHODS.filter((m) => m !== 'CONNECT' && !warmUpMethods.includes(m)))
    await plainStatus(inventoryUrl, method);
  const after = await scrape();
  expect(after.filter((s) => !before.has(s.id)).map((s) => s.id)).toEqual([]);
  const counted = after
    .filter((s) => s.name === 'gateway_http_requests_total' && s.labels.method === 'other')
    .reduce((sum, s) => sum + s.value, 0);
  expect(counted).toBeGreaterThanOrEqual(1500 + 12);
});
