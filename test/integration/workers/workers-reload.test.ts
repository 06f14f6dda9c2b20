import crypto from 'node:crypto';
import fs from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { useRedisPerFile } from '../../support/redis-per-file';
import { makeTestCertificates, type TestCertificates } from '../../support/tls-certs';
import { LONG_ADMIN_TOKEN, startMain, twoWorkersEnv, type MainProcess } from '../startup/startup-kit';
import { eventually } from '../../support/eventually';

/**
 * The "done when" on real processes: WORKERS=2 over HTTPS (h2 and HTTP/1.1), a certificate
 * swapped and a config changed by SIGHUP to the supervisor under traffic with no failed request
 * and no closed connection, then an invalid config refused whole by POST /admin/reload. A raised
 * server.maxBodyBytes reaches every worker and the inventory the supervisor runs.
 */
jest.setTimeout(180_000);

const ORIGIN = 'https://app.example';
const redis = useRedisPerFile();
let main: MainProcess | null = null;
let first: TestCertificates;
let second: TestCertificates;
let ca: Buffer[];
let dir: string;

const file = (name: string) => path.join(dir, name);
const fingerprintOf = (certPath: string) => new crypto.X509Certificate(fs.readFileSync(certPath)).fingerprint256;
const adminHeaders = { authorization: `Bearer ${LONG_ADMIN_TOKEN}`, 'content-type': 'application/json' };

/** As a Kubernetes secret update lands: new files renamed over the old ones. */
function install(cert: string, key: string): void {
  for (const [from, to] of [
    [cert, 'tls.crt'],
    [key, 'tls.key'],
  ] as const) {
    fs.copyFileSync(from, file(`${to}.new`));
    fs.renameSync(file(`${to}.new`), file(to));
  }
}

beforeAll(async () => {
  first = makeTestCertificates();
  second = makeTestCertificates();
  ca = [fs.readFileSync(first.caCert), fs.readFileSync(second.caCert)];
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-workers-reload-'));
});
afterAll(async () => {
  if (main && main.child.exitCode === null) main.child.kill('SIGKILL');
  await main?.exited;
});

const namespace = `asg:workers-reload:${process.pid}:${Date.now()}`;
const OLD_BODY_LIMIT = 1024;
const NEW_BODY_LIMIT = 4096;
const configWith = (origins: string, maxBodyBytes = OLD_BODY_LIMIT) =>
  fs.writeFileSync(
    file('extra.yaml'),
    `redis:\n  namespace: "${namespace}"\nserver:\n  maxBodyBytes: ${maxBodyBytes}\ncors:\n  allowedOrigins: ${origins}\n`,
  );

/** POST /v1/pets with a NewPet padded to 2 KiB (between the two limits), on a connection of its own: the kernel spreads them over the workers (SO_REUSEPORT). */
function postPaddedPet(gatewayUrl: string, auth: string): Promise<number> {
  const json = JSON.stringify({ name: 'Rex', categoryId: 1 });
  const body = json + ' '.repeat(2048 - json.length);
  return new Promise((resolve, reject) => {
    https
      .request(
        `${gatewayUrl}/v1/pets`,
        {
          method: 'POST',
          agent: false,
          ca,
          headers: { authorization: auth, 'content-type': 'application/json', 'content-length': String(body.length) },
        },
        (res) => {
          res.resume().on('end', () => resolve(res.statusCode ?? 0));
        },
      )
      .on('error', reject)
      .end(body);
  });
}

function h2Get(session: http2.ClientHttp2Session, auth: string): Promise<{ status: number; cors: string | undefined }> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':path': '/v1/pets', authorization: auth, origin: ORIGIN });
    stream.on('response', (headers) =>
      resolve({ status: headers[':status'] ?? 0, cors: headers['access-control-allow-origin'] as string | undefined }),
    );
    stream.on('error', reject);
    stream.resume();
  });
}

async function newHandshakeFingerprint(url: string): Promise<string> {
  const session = http2.connect(url, { ca });
  try {
    await new Promise<void>((resolve, reject) => session.once('connect', () => resolve()).once('error', reject));
    return (session.socket as TLSSocket).getPeerCertificate().fingerprint256;
  } finally {
    session.close();
  }
}

test('WORKERS=2 over HTTPS: certificate and config reloaded under traffic, nothing failed, nothing closed; an invalid config refused whole', async () => {
  install(first.serverCert, first.serverKey);
  configWith('[]');
  const env = await twoWorkersEnv(redis.url, {
    CONFIG_FILE: file('extra.yaml'),
    TLS_CERT_FILE: file('tls.crt'),
    TLS_KEY_FILE: file('tls.key'),
  });
  main = startMain(env);
  await main.waitForStdout(/"msg":"listening on Node v[\d.]+ with 2 workers"/);
  const gatewayUrl = `https://127.0.0.1:${env.PORT}`;
  const adminUrl = `http://127.0.0.1:${env.ADMIN_PORT}`;
  const created = await fetch(`${adminUrl}/admin/keys`, {
    method: 'POST',
    headers: adminHeaders,
    body: JSON.stringify({ name: 'reload', plan: 'business' }),
  });
  const auth = `Bearer ${((await created.json()) as { key: string }).key}`;

  // Two HTTP/2 sessions and two HTTP/1.1 keep-alive connections: the kernel spreads them over the workers (SO_REUSEPORT).
  const sessions = [http2.connect(gatewayUrl, { ca }), http2.connect(gatewayUrl, { ca })];
  let closedConnections = 0;
  for (const session of sessions) session.on('close', () => closedConnections++);
  const agent = new https.Agent({ keepAlive: true, maxSockets: 2, ca });
  const http1Sockets = new Set<object>();
  const http1Get = () =>
    new Promise<{ status: number; cors: string | undefined }>((resolve, reject) => {
      https
        .get(`${gatewayUrl}/v1/pets`, { agent, headers: { authorization: auth, origin: ORIGIN } }, (res) => {
          if (!http1Sockets.has(res.socket)) {
            http1Sockets.add(res.socket);
            res.socket.once('close', () => closedConnections++);
          }
          res
            .resume()
            .on('end', () =>
              resolve({ status: res.statusCode ?? 0, cors: res.headers['access-control-allow-origin'] }),
            );
        })
        .on('error', reject);
    });

  const answers: Array<{ status: number; cors: string | undefined }> = [];
  let failures = 0;
  let running = true;
  const client = async (send: () => Promise<{ status: number; cors: string | undefined }>) => {
    while (running && answers.length < 20_000) {
      try {
        const answer = await send();
        answers.push(answer);
        if (answer.status !== 200) failures++;
      } catch {
        failures++;
      }
    }
  };
  const traffic = Promise.all([
    ...sessions.map((s) => client(() => h2Get(s, auth))),
    client(http1Get),
    client(http1Get),
  ]);
  try {
    await eventually(async () => answers.length >= 50, { timeoutMs: 10_000, what: 'traffic flowing' });
    expect(await newHandshakeFingerprint(gatewayUrl)).toBe(fingerprintOf(first.serverCert));
    expect(await postPaddedPet(gatewayUrl, auth)).toBe(413);

    install(second.serverCert, second.serverKey);
    configWith(`["${ORIGIN}"]`, NEW_BODY_LIMIT);
    main.child.kill('SIGHUP');
    await main.waitForStdout(/"msg":"config reloaded"/);
    const afterReload = answers.length;
    await eventually(
      async () => answers.length > afterReload + 100 && answers.slice(-20).every((a) => a.cors === ORIGIN),
      { timeoutMs: 10_000, what: 'every client sees the new config' },
    );
    expect(await newHandshakeFingerprint(gatewayUrl)).toBe(fingerprintOf(second.serverCert));
    // Both workers' gateways and the supervisor's inventory take the body the old limit refused: 201 is the inventory's.
    const created = await Promise.all([0, 1, 2, 3].map(() => postPaddedPet(gatewayUrl, auth)));
    expect(created).toEqual([201, 201, 201, 201]);

    const shown = (await (await fetch(`${adminUrl}/admin/config`, { headers: adminHeaders })).json()) as {
      hash: string;
    };
    configWith('["not an origin"]\nplans:\n  business: { perMinute: 0, perDay: 10 }', NEW_BODY_LIMIT);
    const refused = await fetch(`${adminUrl}/admin/reload`, { method: 'POST', headers: adminHeaders });
    expect(refused.status).toBe(400);
    const body = (await refused.json()) as { code: string; errors: Array<{ setting: string }> };
    expect(body.code).toBe('invalid_config');
    expect(body.errors.map((e) => e.setting)).toEqual(
      expect.arrayContaining(['cors.allowedOrigins.0', 'plans.business.perMinute']),
    );
    const stillAnswering = answers.length;
    await eventually(async () => answers.length > stillAnswering + 50, {
      timeoutMs: 10_000,
      what: 'traffic still flowing',
    });
    expect(answers.slice(-20).every((a) => a.cors === ORIGIN)).toBe(true);

    // Each worker shows the same hash, and /metrics names it once.
    for (let i = 0; i < 4; i++) {
      const again = (await (await fetch(`${adminUrl}/admin/config`, { headers: adminHeaders })).json()) as {
        hash: string;
      };
      expect(again.hash).toBe(shown.hash);
    }
    const metrics = await (await fetch(`${adminUrl}/metrics`)).text();
    expect(metrics).toContain(`gateway_config_info{hash="${shown.hash}"} 1`);
    expect(metrics).toMatch(/gateway_config_reloads_total\{result="success"\} 1\b/);
    expect(metrics).toMatch(/gateway_config_reloads_total\{result="failure"\} 1\b/);

    // Issue 42: the supervisor holds no key store; it asks a worker whether a key uses a plan the reload removes.
    configWith(`["${ORIGIN}"]\nplans:\n  gold: { perMinute: 100, perDay: 1000 }`);
    expect((await fetch(`${adminUrl}/admin/reload`, { method: 'POST', headers: adminHeaders })).status).toBe(200);
    const gold = await fetch(`${adminUrl}/admin/keys`, {
      method: 'POST',
      headers: adminHeaders,
      body: JSON.stringify({ name: 'gold', plan: 'gold' }),
    });
    expect(gold.status).toBe(201);
    configWith(`["${ORIGIN}"]`);
    const removal = await fetch(`${adminUrl}/admin/reload`, { method: 'POST', headers: adminHeaders });
    expect(removal.status).toBe(400);
    expect(((await removal.json()) as { errors: unknown }).errors).toEqual([
      { setting: 'plans.gold', message: expect.stringMatching(/used by 1 key/) },
    ]);
  } finally {
    running = false;
    await traffic;
    for (const session of sessions) session.removeAllListeners('close');
    for (const socket of http1Sockets) (socket as { removeAllListeners(e: string): void }).removeAllListeners('close');
    process.stdout.write(
      `WORKERS=2 reload under traffic: ${answers.length} requests, ${failures} failed, ${closedConnections} connections closed\n`,
    );
    for (const session of sessions) session.close();
    agent.destroy();
  }
  expect(failures).toBe(0);
  expect(closedConnections).toBe(0);
  expect(http1Sockets.size).toBe(2);
});
