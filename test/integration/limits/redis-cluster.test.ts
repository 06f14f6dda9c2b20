import net from 'node:net';
import fs from 'node:fs';
import { ManualClock } from '../../../src/shared/clock';
import { connectRedis, type RedisClient } from '../../../src/shared/redis';
import { createRedisAddressLimiter } from '../../../src/limits/address-limiter';
import { RedisKeyLimiter } from '../../../src/limits/redis-key-limiter';
import type { KeyDecision } from '../../../src/limits/types';
import { DEFAULT_BAN, describeKeyLimiterBehaviours } from '../../unit/limits/key-limiter-behaviours';
import { startRedisServer, type RedisProcess } from '../../support/redis-server';
import { uniqueNamespace } from '../../support/test-redis';

// A one-node Redis Cluster holding all 16384 slots: Cluster rules apply (a script may only touch
// keys of one slot, declared in KEYS) though one process serves them all.

/** Sends one inline command and returns the raw reply. */
function rawCommand(port: number, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    socket.once('connect', () => socket.write(command + '\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      // Simple replies end at the first CRLF; bulk replies ($len) after their payload.
      const bulk = /^\$(\d+)\r\n/.exec(reply);
      if ((bulk && reply.length >= bulk[0].length + Number(bulk[1]) + 2) || (!bulk && reply.endsWith('\r\n'))) {
        socket.destroy();
        resolve(reply);
      }
    });
    socket.once('error', reject);
  });
}

/**
 * Redis keeps a fresh cluster node in the fail state for about two seconds after startup, whatever
 * its slots; this waits for that readiness like the support code waits for PING, with a deadline.
 */
async function waitForClusterOk(port: number, deadline: number): Promise<void> {
  while (!(await rawCommand(port, 'CLUSTER INFO')).includes('cluster_state:ok')) {
    if (Date.now() > deadline) throw new Error('the test cluster node did not reach cluster_state:ok');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

let server: RedisProcess;
let client: RedisClient;
let otherClient: RedisClient;

function connectCluster(): Promise<RedisClient> {
  return connectRedis({ url: null, clusterNodes: [`127.0.0.1:${server.port}`], commandTimeoutMs: 5000 });
}

beforeAll(async () => {
  server = await startRedisServer(['--cluster-enabled', 'yes', '--cluster-announce-ip', '127.0.0.1']);
  expect(await rawCommand(server.port, 'CLUSTER ADDSLOTSRANGE 0 16383')).toBe('+OK\r\n');
  await waitForClusterOk(server.port, Date.now() + 15_000);
  client = await connectCluster();
  otherClient = await connectCluster();
});

afterAll(async () => {
  await client?.quit();
  await otherClient?.quit();
  await server?.stop();
  if (server) fs.rmSync(server.dir, { recursive: true, force: true });
});

describeKeyLimiterBehaviours('RedisKeyLimiter on a Redis Cluster', {
  create: (clock, ban) => new RedisKeyLimiter(client, { namespace: uniqueNamespace('cl'), ban, clock }),
});

describe('RedisKeyLimiter on a Redis Cluster: exactness', () => {
  it('admits exactly 60 of 200 concurrent requests over two Cluster clients (Redis TIME)', async () => {
    const namespace = uniqueNamespace('cl-exact');
    const a = new RedisKeyLimiter(client, { namespace, ban: DEFAULT_BAN });
    const b = new RedisKeyLimiter(otherClient, { namespace, ban: DEFAULT_BAN });
    const dayLimits = { perMinute: 1000, perDay: 60 };
    const calls: Promise<KeyDecision>[] = [];
    for (let i = 0; i < 200; i++) calls.push((i % 2 === 0 ? a : b).consume('k1', dayLimits));
    const decisions = await Promise.all(calls);
    expect(decisions.filter((d) => d.outcome === 'allowed')).toHaveLength(60);
  });
});

describe('address limiter on a Redis Cluster', () => {
  it('allows the limit and refuses the next', async () => {
    const limiter = createRedisAddressLimiter(client, { namespace: uniqueNamespace('cl-addr'), perMinute: 3, clock: new ManualClock() });
    const decisions = [];
    for (let i = 0; i < 4; i++) decisions.push(await limiter.consume('203.0.113.7'));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
    expect(decisions[3]!.retryAfterMs).toBeGreaterThan(0);
  });
});
