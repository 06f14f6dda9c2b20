import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { drawingPortsAgain, freePort, startRedisServer, type RedisProcess } from './redis-server';
import { redisTlsArgs, type TestCertificates } from './tls-certs';
import { eventually } from './eventually';

export interface RedisCluster {
  /** `127.0.0.1:port` of every master, as REDIS_CLUSTER_NODES takes them. */
  nodes: string[];
  /** Their plain ports, which the tests use to look inside (with `tls`, nodes announce their TLS ports instead). */
  ports: number[];
  /** With `tls`: `127.0.0.1:tlsPort` of every master, in the order of `nodes`; otherwise empty. */
  tlsNodes: string[];
  /** Milliseconds from the first spawn to cluster_state:ok on every node. */
  startedInMs: number;
  /** Kills one master (SIGKILL), as a crash would; stop() still cleans up after it. */
  killNode(port: number): Promise<void>;
  stop(): Promise<void>;
}

/** Sends one inline command over a raw socket and returns the raw reply (simple or bulk). */
export function rawCommand(port: number, command: string, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    socket.setTimeout(timeoutMs, () => {
      socket.destroy();
      reject(new Error(`no reply to ${command} from port ${port} within ${timeoutMs} ms`));
    });
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
 * A node reports cluster_state:ok once it sees every slot served (Redis also keeps a fresh node in
 * the fail state for a moment after startup); waits for that with a deadline.
 */
export async function waitForClusterOk(port: number, deadline: number): Promise<void> {
  await eventually(async () => (await rawCommand(port, 'CLUSTER INFO')).includes('cluster_state:ok'), {
    timeoutMs: Math.max(0, deadline - Date.now()),
    pollMs: 50,
    what: `the test cluster node on port ${port} at cluster_state:ok`,
  });
}

/** `count` distinct free ports (freePort draws at random, so two draws may coincide). */
async function distinctFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

function redisCliClusterCreate(nodes: string[], timeoutMs: number, tls?: TestCertificates): Promise<string> {
  // With tls-cluster on, the nodes meet at their TLS ports, so redis-cli has to speak TLS to them.
  const tlsArgs = tls ? ['--tls', '--cacert', tls.caCert] : [];
  return new Promise((resolve, reject) => {
    execFile(
      'redis-cli',
      [...tlsArgs, '--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'],
      { timeout: timeoutMs, encoding: 'utf8' },
      (err, stdout, stderr) => {
        if (err || !stdout.includes('All 16384 slots covered')) {
          reject(new Error(`redis-cli --cluster create failed: ${err?.message ?? ''}\n${stdout}\n${stderr}`));
          return;
        }
        resolve(stdout);
      },
    );
  });
}

/**
 * Starts a private Redis Cluster of `masters` masters (no replicas) on free loopback ports, each a
 * redis-server with cluster mode on, no persistence and its bus on a port of its own; creates the
 * cluster with `redis-cli --cluster create` and returns once every node says cluster_state:ok.
 * With `tls`, every node also listens with TLS on a port of its own (no client certificate
 * required of clients), and the bus and replication speak TLS too; the plain ports stay for looking
 * inside. Never touches the machine's shared Redis.
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  // A hang guard (docs/testing.md): 20 s before, which a Cluster start at load 20 could outlast.
  const deadline = Date.now() + (options.timeoutMs ?? 120_000);
  const started = Date.now();
  // Six ports drawn at once, each free when drawn: another worker may take one before its node
  // listens. The node then exits saying so, and the whole set is drawn again.
  return drawingPortsAgain(() => startRedisClusterOn(options, deadline, started));
}

interface RedisClusterOptions {
  masters?: number;
  timeoutMs?: number;
  /** More redis-server arguments for every node. */
  extraArgs?: string[];
  /** Certificates for a TLS port per node, tls-cluster and tls-replication. */
  tls?: TestCertificates;
}

async function startRedisClusterOn(
  options: RedisClusterOptions,
  deadline: number,
  started: number,
): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-cluster-'));
  // Client and bus ports drawn together; the bus would otherwise sit on port + 10000, inside the
  // ephemeral range where client sockets could take it. With `tls`, a third range for the TLS ports.
  const tls = options.tls;
  const ports = await distinctFreePorts(masters * (tls ? 3 : 2));
  const tlsPort = (i: number) => ports[2 * masters + i]!;
  const tlsArgs = (i: number) =>
    tls
      ? [
          ...redisTlsArgs(tls, tlsPort(i), { requireClientCert: false }),
          '--tls-cluster',
          'yes',
          '--tls-replication',
          'yes',
          // A node dialling another's bus presents a client certificate (the bus always asks for one).
          '--tls-client-cert-file',
          tls.clientCert,
          '--tls-client-key-file',
          tls.clientKey,
        ]
      : [];
  const servers: RedisProcess[] = [];
  const stopAll = async () => {
    await Promise.all(servers.map((server) => server.stop()));
    for (const server of servers) fs.rmSync(server.dir, { recursive: true, force: true });
    fs.rmSync(configDir, { recursive: true, force: true });
  };
  try {
    const launched = await Promise.allSettled(
      Array.from({ length: masters }, (_, i) =>
        startRedisServer(
          [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            path.join(configDir, `nodes-${ports[i]}.conf`),
            '--cluster-announce-ip',
            '127.0.0.1',
            '--cluster-port',
            String(ports[masters + i]),
            '--cluster-node-timeout',
            '5000',
            ...tlsArgs(i),
            ...(options.extraArgs ?? []),
          ],
          ports[i],
        ),
      ),
    );
    for (const result of launched) if (result.status === 'fulfilled') servers.push(result.value);
    const failed = launched.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) throw failed.reason;

    const nodes = servers.map((server) => `127.0.0.1:${server.port}`);
    const tlsNodes = tls ? servers.map((_, i) => `127.0.0.1:${tlsPort(i)}`) : [];
    await redisCliClusterCreate(tls ? tlsNodes : nodes, Math.max(1000, deadline - Date.now()), tls);
    await Promise.all(servers.map((server) => waitForClusterOk(server.port, deadline)));
    const killNode = async (port: number) => {
      const server = servers.find((candidate) => candidate.port === port);
      if (!server) throw new Error(`no node of this cluster listens on ${port}`);
      await server.stop();
    };
    return {
      nodes,
      ports: servers.map((server) => server.port),
      tlsNodes,
      startedInMs: Date.now() - started,
      killNode,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
