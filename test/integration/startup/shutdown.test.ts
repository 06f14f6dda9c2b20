import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import Redis from 'ioredis';
import request from 'supertest';
import { loadConfig } from '../../../src/shared/config';
import { UPSTREAM_TOKEN_HEADER } from '../../../src/shared/http/upstream-token';
import { useRedisPerFile } from '../../support/redis-per-file';
import {
  TEST_SIGNING_SECRET,
  countPetRows,
  makeTempDir,
  spawnInventoryProcess,
  stopInventoryProcess,
  tokenSigner,
  type InventoryProcess,
} from '../../support/inventory-harness';
import { isolatedEnv, LONG_ADMIN_TOKEN, startMain, tempFile, type MainProcess } from './startup-kit';
import { getThrough, heldAnswer, startFakeUpstream, type FakeUpstream, type Outcome } from './held-upstream';
import { eventually } from '../../support/eventually';

/**
 * Graceful shutdown of the real processes (issue 5): `src/main.ts` and `src/inventory/main.ts` as
 * child processes, sent real signals.
 *
 * On SIGTERM or SIGINT the gateway stops accepting, lets requests in flight finish (up to
 * server.shutdownTimeoutMs, which has no environment variable: CONFIG_FILE sets it here), closes
 * Redis and SQLite, and exits 0; a second signal exits 1 at once.
 *
 * The upstream is a fake inventory in this test that holds every /v1 request until the test
 * releases it, so "in flight" is a state the test controls rather than a race against a timer.
 * Redis is a private redis-server of this file, so every client on it other than the observer
 * belongs to the process under test.
 */

jest.setTimeout(180_000);

const redis = useRedisPerFile();
let observer: Redis;
const started: MainProcess[] = [];
const inventories: InventoryProcess[] = [];
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
  // A failed assertion must leave no process, held request or listener behind.
  for (const main of started.splice(0)) {
    if (main.child.exitCode === null && main.child.signalCode === null) main.child.kill('SIGKILL');
    await main.exited;
  }
  for (const inventory of inventories.splice(0)) await stopInventoryProcess(inventory, 'SIGKILL');
  for (const upstream of upstreams.splice(0)) await upstream.close();
  for (const dir of dataDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** isolatedEnv with its DATA_DIR removed after the test. */
async function privateEnv(extra: Record<string, string> = {}): Promise<Record<string, string>> {
  const env = await isolatedEnv(extra);
  dataDirs.push(env.DATA_DIR!);
  return env;
}

function privateDataDir(): string {
  const dir = makeTempDir('shutdown-inventory');
  dataDirs.push(dir);
  return dir;
}

// ---------------------------------------------------------------------------------------------
// Test equipment

/** startFakeUpstream, closed after the test. */
async function startHeldUpstream(): Promise<FakeUpstream> {
  const upstream = await startFakeUpstream();
  upstreams.push(upstream);
  return upstream;
}

/** 'refused', 'accepted', or another error code, for one TCP connect to 127.0.0.1:port. */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('accepted');
    });
    socket.once('error', (err: NodeJS.ErrnoException) =>
      resolve(err.code === 'ECONNREFUSED' ? 'refused' : (err.code ?? err.message)),
    );
  });
}

/** Polls until connecting to `port` is refused; fails after `timeoutMs`. */
async function waitUntilRefused(port: number, timeoutMs = 5000): Promise<void> {
  let result = '';
  await eventually(async () => (result = await tryConnect(port)) === 'refused', {
    timeoutMs,
    what: () => `port ${port} refusing connections after the signal (still: ${result})`,
  });
}

/** Clients of the private Redis other than the observer: the process under test's connections. */
async function productRedisClients(): Promise<number> {
  const ownId = String(await observer.client('ID'));
  const list = (await observer.client('LIST')) as string;
  return list
    .split('\n')
    .filter((line) => line.startsWith('id='))
    .filter((line) => line.split(' ')[0] !== `id=${ownId}`).length;
}

function isRunning(main: MainProcess): boolean {
  return main.child.exitCode === null && main.child.signalCode === null;
}

/** Exit code and the time it came, measured from now. */
function timedExit(main: MainProcess): Promise<{ code: number | null; at: number }> {
  return main.exited.then((code) => ({ code, at: Date.now() }));
}

interface RunningGateway {
  main: MainProcess;
  env: Record<string, string>;
  gatewayUrl: string;
  gatewayPort: number;
  adminPort: number;
  key: string;
}

/**
 * src/main.ts in development with the fake upstream, the private Redis, a known admin token and
 * `configYaml` as CONFIG_FILE; a fresh pro key created over the admin API.
 */
async function startGateway(upstream: FakeUpstream, configYaml: string): Promise<RunningGateway> {
  const env = await privateEnv({
    INVENTORY_URL: upstream.url,
    REDIS_URL: redis.url,
    ADMIN_TOKEN: LONG_ADMIN_TOKEN,
    CONFIG_FILE: tempFile('shutdown.yaml', configYaml),
  });
  const main = startMain(env);
  started.push(main);
  const gatewayUrl = (await main.waitForStdout(/is ready on (http:\/\/\S+)\n/))[1]!;
  const created = await request(`http://127.0.0.1:${env.ADMIN_PORT}`)
    .post('/admin/keys')
    .set('Authorization', `Bearer ${LONG_ADMIN_TOKEN}`)
    .send({ name: 'shutdown test', plan: 'pro' })
    .expect(201);
  return {
    main,
    env,
    gatewayUrl,
    gatewayPort: Number(env.PORT),
    adminPort: Number(env.ADMIN_PORT),
    key: (created.body as { key: string }).key,
  };
}

type ClientConnections = 'close' | 'keep-alive';

/**
 * The graceful path: `count` requests held by the upstream, then `signal`. New connections must be
 * refused while the held requests are still open, each of them must then complete with its own
 * 200, and only then may the process exit, with 0 and no Redis connection left. server.shutdownTimeoutMs
 * is the default (10 s): the exit must come from the last answer, well before that bound.
 */
async function shutdownWithRequestsInFlight(
  signal: NodeJS.Signals,
  count: number,
  forwarder: 'undici' | 'http-proxy',
  clients: ClientConnections,
): Promise<void> {
  // No earlier process of this file is still connected: every client counted below is this one's.
  await eventually(async () => (await productRedisClients()) === 0, {
    timeoutMs: 3000,
    what: 'no other client on the private Redis',
  });
  const upstream = await startHeldUpstream();
  const gateway = await startGateway(upstream, `upstream:\n  timeoutMs: 60000\n  forwarder: ${forwarder}\n`);
  const { main } = gateway;
  // The key store's command connection and its SUBSCRIBE connection, at least.
  expect(await productRedisClients()).toBeGreaterThanOrEqual(2);

  const agent = clients === 'keep-alive' ? new http.Agent({ keepAlive: true }) : false;
  try {
    let settled = 0;
    const paths = Array.from({ length: count }, (_, i) => `/v1/pets?limit=${i + 1}`);
    const pending = paths.map((p) =>
      getThrough(agent, gateway.gatewayUrl, p, gateway.key).then((outcome) => {
        settled += 1;
        return outcome;
      }),
    );
    await upstream.waitForRequests(count);
    expect(upstream.receivedPaths().sort()).toEqual([...paths].sort());

    const exit = timedExit(main);
    main.child.kill(signal);
    await waitUntilRefused(gateway.gatewayPort);
    await waitUntilRefused(gateway.adminPort);

    // Not accepting, yet still waiting for the requests it took.
    expect(isRunning(main)).toBe(true);
    expect(settled).toBe(0);

    const releasedAt = Date.now();
    upstream.release();
    const outcomes = await Promise.all(pending);
    expect(outcomes).toEqual(paths.map((p) => ({ status: 200, body: heldAnswer(p) })));

    const { code, at } = await exit;
    expect(code).toBe(0);
    // It exited because the last request was answered, not because the 10 s bound ran out.
    expect(at - releasedAt).toBeLessThan(5000);
    expect(main.stdout()).toContain(`"signal":"${signal}"`);
    expect(main.stdout()).toContain('"msg":"shutting down"');
    expect(main.stdout()).not.toContain('shutdown did not finish');
    expect(main.stderr()).toBe('');
    // Redis notices a closed socket on its next loop turn: poll briefly.
    await eventually(async () => (await productRedisClients()) === 0, {
      timeoutMs: 3000,
      what: "the process's Redis connections are gone",
    });
  } finally {
    if (agent) agent.destroy();
  }
}

// ---------------------------------------------------------------------------------------------
// The gateway (src/main.ts)

test('SIGTERM: refuses new connections, completes 4 requests in flight with their own 200 bodies, closes Redis, exits 0 (undici forwarder)', async () => {
  await shutdownWithRequestsInFlight('SIGTERM', 4, 'undici', 'close');
});

test('SIGINT behaves like SIGTERM: 2 requests in flight complete, then exit 0 with Redis closed (http-proxy forwarder)', async () => {
  await shutdownWithRequestsInFlight('SIGINT', 2, 'http-proxy', 'close');
});

test('keep-alive clients: requests in flight at SIGTERM complete and the process exits once they are answered, not at server.shutdownTimeoutMs', async () => {
  // Node's server.close() ends only the connections idle at that instant; a keep-alive connection
  // whose request finishes afterwards stays open unless the product ends it.
  await shutdownWithRequestsInFlight('SIGTERM', 3, 'undici', 'keep-alive');
});

test('server.shutdownTimeoutMs bounds the wait: a request the upstream never answers is cut after 1 s and the process exits 0', async () => {
  const upstream = await startHeldUpstream();
  const gateway = await startGateway(upstream, 'server:\n  shutdownTimeoutMs: 1000\nupstream:\n  timeoutMs: 60000\n');
  const { main } = gateway;
  const agent = new http.Agent({ keepAlive: true });
  try {
    const pending = getThrough(agent, gateway.gatewayUrl, '/v1/pets', gateway.key);
    await upstream.waitForRequests(1);

    const signalledAt = Date.now();
    const exit = timedExit(main);
    main.child.kill('SIGTERM');
    await waitUntilRefused(gateway.gatewayPort);

    const outcome = await pending;
    const { code, at } = await exit;
    // close() resolved once the bound cut the connection, so main.ts exits 0 (not the backstop's 1).
    expect(code).toBe(0);
    expect(at - signalledAt).toBeGreaterThanOrEqual(900);
    // Bound (1 s) plus start-up of nothing: far below the 1 s + 5 s backstop of main.ts.
    expect(at - signalledAt).toBeLessThan(5500);
    // The held request is cut: the connection closes without an answer (a 5xx would also be acceptable).
    if ('status' in outcome) expect(outcome.status).toBeGreaterThanOrEqual(500);
    else expect(outcome.error).toMatch(/ECONNRESET|socket hang up/);
    expect(main.stdout()).not.toContain('shutdown did not finish');
    expect(main.stderr()).toBe('');
    // Redis notices a closed socket on its next loop turn: poll briefly.
    await eventually(async () => (await productRedisClients()) === 0, {
      timeoutMs: 3000,
      what: "the process's Redis connections are gone",
    });
  } finally {
    agent.destroy();
  }
});

test('a second signal during a graceful stop exits 1 at once, long before server.shutdownTimeoutMs', async () => {
  const upstream = await startHeldUpstream();
  const gateway = await startGateway(upstream, 'server:\n  shutdownTimeoutMs: 30000\nupstream:\n  timeoutMs: 60000\n');
  const { main } = gateway;
  const agent = new http.Agent({ keepAlive: true });
  try {
    const pending = getThrough(agent, gateway.gatewayUrl, '/v1/pets', gateway.key);
    await upstream.waitForRequests(1);

    const exit = timedExit(main);
    main.child.kill('SIGTERM');
    // The first stop is under way (listener closed, request still held) before the second signal.
    await main.waitForStdout(/"msg":"shutting down"/);
    await waitUntilRefused(gateway.gatewayPort);
    expect(isRunning(main)).toBe(true);

    const secondAt = Date.now();
    main.child.kill('SIGTERM');
    const { code, at } = await exit;
    expect(code).toBe(1);
    expect(at - secondAt).toBeLessThan(5000);
    expect(main.stdout()).toContain('second signal: exiting now');

    const outcome = await pending;
    expect(outcome).toEqual({ error: expect.stringMatching(/ECONNRESET|socket hang up/) });
  } finally {
    agent.destroy();
  }
});

// ---------------------------------------------------------------------------------------------
// The embedded inventory (npm start with nothing configured)

const READY_WITH_KEY = /Bearer (asg_dev_[0-9A-Za-z]{22,})" (http:\/\/\S+)\/v1\/pets\n/;
const READY = /is ready on (http:\/\/\S+)\n/;

test('embedded inventory: a pet written before SIGTERM (exit 0, SQLite closed: no -wal left) is read back after a restart', async () => {
  const env = await privateEnv();
  const first = startMain(env);
  started.push(first);
  const [, key, gatewayUrl] = await first.waitForStdout(READY_WITH_KEY);

  const created = await request(gatewayUrl!)
    .post('/v1/pets')
    .set('Authorization', `Bearer ${key}`)
    .send({ name: 'Survives the restart', categoryId: 3 })
    .expect(201);
  const pet = created.body as { id: number; name: string };
  expect(pet.name).toBe('Survives the restart');
  // WAL mode: the write sits in the -wal file until the last connection closes and checkpoints it.
  expect(fs.existsSync(path.join(env.DATA_DIR!, 'inventory.sqlite-wal'))).toBe(true);

  first.child.kill('SIGTERM');
  expect(await first.exited).toBe(0);
  expect(first.stderr()).toBe('');
  // A clean sqlite3_close checkpoints the WAL into the database and deletes it; a process that died
  // with the database open would leave it behind for recovery.
  for (const file of ['inventory.sqlite', 'keys.sqlite']) {
    expect(fs.existsSync(path.join(env.DATA_DIR!, file))).toBe(true);
    expect(fs.existsSync(path.join(env.DATA_DIR!, `${file}-wal`))).toBe(false);
  }

  const second = startMain(env);
  started.push(second);
  const secondUrl = (await second.waitForStdout(READY))[1]!;
  const read = await request(secondUrl).get(`/v1/pets/${pet.id}`).set('Authorization', `Bearer ${key}`).expect(200);
  expect(read.body).toEqual(created.body);

  second.child.kill('SIGTERM');
  expect(await second.exited).toBe(0);
  expect(second.stderr()).toBe('');
});

// ---------------------------------------------------------------------------------------------
// The standalone inventory (src/inventory/main.ts)

test('standalone inventory: SIGTERM with an idle keep-alive connection exits 0 promptly and closes SQLite', async () => {
  const dataDir = privateDataDir();
  const inventory = await spawnInventoryProcess({
    dataDir,
    env: { CONFIG_FILE: tempFile('inventory.yaml', 'server:\n  shutdownTimeoutMs: 30000\n') },
  });
  inventories.push(inventory);
  // A client that keeps its connection open after an answer, as the gateway's pool does.
  const agent = new http.Agent({ keepAlive: true });
  try {
    const health = await getThrough(agent, inventory.url, '/healthz', 'unused');
    expect(health).toMatchObject({ status: 200 });
    expect(fs.existsSync(path.join(dataDir, 'inventory.sqlite-wal'))).toBe(true);

    const signalledAt = Date.now();
    const exit = await stopInventoryProcess(inventory, 'SIGTERM');
    expect(exit).toEqual({ code: 0, signal: null });
    // The idle connection does not hold the stop until server.shutdownTimeoutMs (30 s).
    expect(Date.now() - signalledAt).toBeLessThan(10_000);
    expect(inventory.stderr()).toBe('');
    expect(await tryConnect(inventory.port)).toBe('refused');
    expect(fs.existsSync(path.join(dataDir, 'inventory.sqlite-wal'))).toBe(false);
  } finally {
    agent.destroy();
  }
});

const signer = tokenSigner(loadConfig({ env: {}, overrides: { signing: { secret: TEST_SIGNING_SECRET } } }));

test('standalone inventory: a POST in flight at SIGTERM on a keep-alive connection gets its 201, is kept, and the process exits 0 once it is answered', async () => {
  const dataDir = privateDataDir();
  // server.shutdownTimeoutMs is the default, 10 s.
  const inventory = await spawnInventoryProcess({ dataDir });
  inventories.push(inventory);
  const agent = new http.Agent({ keepAlive: true });
  try {
    const body = JSON.stringify({ name: 'In flight at SIGTERM', categoryId: 5 });
    const post = http.request(`${inventory.url}/v1/pets`, {
      method: 'POST',
      agent,
      headers: {
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(body)),
        // The 100 Continue tells the test the server has parsed the headers: the request is in flight.
        expect: '100-continue',
        [UPSTREAM_TOKEN_HEADER]: await signer.sign({ keyId: 'shutdown', plan: 'free' }),
      },
    });
    const answered = new Promise<Outcome>((resolve) => {
      post.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown }),
        );
      });
      post.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
    });
    await new Promise<void>((resolve) => {
      post.once('continue', () => resolve());
      post.flushHeaders();
    });

    const exit = inventory.exited.then((result) => ({ ...result, at: Date.now() }));
    inventory.child.kill('SIGTERM');
    await waitUntilRefused(inventory.port);
    expect(inventory.child.exitCode).toBeNull();

    const sentAt = Date.now();
    post.end(body);
    const outcome = await answered;
    expect(outcome).toEqual({
      status: 201,
      body: expect.objectContaining({ name: 'In flight at SIGTERM', categoryId: 5 }),
    });

    const { code, signal, at } = await exit;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    // Exited because the request was answered, not because the 10 s bound ran out.
    expect(at - sentAt).toBeLessThan(5000);
    expect(inventory.stderr()).toBe('');
    expect(fs.existsSync(path.join(dataDir, 'inventory.sqlite-wal'))).toBe(false);
    expect(countPetRows(path.join(dataDir, 'inventory.sqlite'))).toBe(1);
  } finally {
    agent.destroy();
  }
});
