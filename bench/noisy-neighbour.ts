import http from 'node:http';
import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { BenchChild } from './processes';

/**
 * `npm run bench -- --noisy-neighbour`: issue 43's scenario against `npm start`'s gateway
 * (dist/main.js, the default config: maxSockets 256, maxPending 256, timeoutMs 10 s; Redis). The
 * inventory answers every request after 1 s; one enterprise key keeps `loudConnections` requests
 * open (each sent again as soon as it is answered, as wrk does); two `pro` keys send one request
 * at a time. Reports the quiet keys' answers (by status, p50, p99, slowest) and the loud key's
 * admitted rate. See docs/benchmark.md.
 */

export interface NoisyNeighbourSettings {
  loudConnections: number;
  /** Requests of the two quiet keys together (half each). */
  quietRequests: number;
}

const INVENTORY_DELAY_MS = 1000;
const PETS = Buffer.from('[{"id":1,"name":"Rex","status":"available","categoryId":1}]');

export interface SlowInventory {
  url: string;
  close(): Promise<void>;
}

export async function startSlowInventory(): Promise<SlowInventory> {
  const sockets = new Set<net.Socket>();
  const server = http.createServer((req, res) => {
    req.resume();
    // Its own health is quick (the gateway's /readyz asks it within 1 s); its answers are slow.
    if (req.url === '/healthz')
      return res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    const timer = setTimeout(
      () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(PETS.length) }).end(PETS),
      INVENTORY_DELAY_MS,
    );
    res.on('close', () => clearTimeout(timer));
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}

function once(agent: http.Agent | false, url: string, auth: string): Promise<{ status: number; elapsedMs: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const done = (status: number) => resolve({ status, elapsedMs: performance.now() - started });
    const req = http.request(url, { agent, headers: { authorization: auth }, timeout: 30_000 });
    req.on('timeout', () => req.destroy(new Error('gave up')));
    req.on('error', () => done(0));
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => done(res.statusCode ?? 0));
      res.on('error', () => done(0));
    });
    req.end();
  });
}

function percentile(sorted: readonly number[], p: number): number {
  return Math.round(sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * p) - 1)] ?? 0);
}

async function createKey(adminUrl: string, adminToken: string, body: object): Promise<string> {
  const res = await fetch(`${adminUrl}/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`creating a key answered ${res.status}`);
  return ((await res.json()) as { key: string }).key;
}

export async function runNoisyNeighbour(
  settings: NoisyNeighbourSettings,
  target: { gateway: BenchChild; adminUrl: string; adminToken: string },
) {
  const url = `${target.gateway.url}/v1/pets`;
  const loudAuth = `Bearer ${target.gateway.details.admitted}`;
  const quietAuths = await Promise.all(
    [0, 1].map(
      async (i) => `Bearer ${await createKey(target.adminUrl, target.adminToken, { name: `quiet ${i}`, plan: 'pro' })}`,
    ),
  );
  const agent = new http.Agent({ keepAlive: true, maxSockets: settings.loudConnections });
  const loudStatuses = new Map<number, number>();
  let running = true;
  const loud = Array.from({ length: settings.loudConnections }, async () => {
    while (running) {
      const { status } = await once(agent, url, loudAuth);
      loudStatuses.set(status, (loudStatuses.get(status) ?? 0) + 1);
    }
  });
  // Let the flood reach the bound before the quiet keys start.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const loudAtStart = new Map(loudStatuses);
  const started = performance.now();
  const quiet = (
    await Promise.all(
      quietAuths.map(async (auth) => {
        const answers: Array<{ status: number; elapsedMs: number }> = [];
        for (let i = 0; i < settings.quietRequests / 2; i++) answers.push(await once(false, url, auth));
        return answers;
      }),
    )
  ).flat();
  const seconds = (performance.now() - started) / 1000;
  const loudDuring = [...loudStatuses].map(([status, n]) => [status, n - (loudAtStart.get(status) ?? 0)] as const);
  running = false;
  await Promise.all(loud);
  agent.destroy();
  const sorted = quiet.map((a) => a.elapsedMs).sort((x, y) => x - y);
  const quietByStatus: Record<string, number> = {};
  for (const a of quiet) quietByStatus[a.status] = (quietByStatus[a.status] ?? 0) + 1;
  const loudByStatus = Object.fromEntries(loudDuring.map(([status, n]) => [String(status), n]));
  return {
    settings,
    inventoryDelayMs: INVENTORY_DELAY_MS,
    seconds: Math.round(seconds),
    quiet: {
      requests: quiet.length,
      byStatus: quietByStatus,
      p50Ms: percentile(sorted, 0.5),
      p99Ms: percentile(sorted, 0.99),
      slowestMs: Math.round(sorted.at(-1) ?? 0),
    },
    loud: { byStatus: loudByStatus, admittedPerSecond: Math.round(((loudByStatus['200'] ?? 0) / seconds) * 10) / 10 },
  };
}
