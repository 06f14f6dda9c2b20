import { execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { drawingPortsAgain, exitedAtStart, freePort, READY_LINE, spawnLoggedRedis } from '../../support/redis-server';
import { eventually } from '../../support/eventually';

/**
 * The stores the window-invariant harness runs on, of the test's own, that keep their data
 * across a restart (append-only file with fsync always, and SHUTDOWN SAVE): one redis-server, or
 * a Cluster of three masters. And the faults it inflicts on them.
 */

/** The shared store the fleet runs on, and the faults the harness inflicts on it. */
export interface FaultedStore {
  /** What points an instance at it (REDIS_URL or REDIS_CLUSTER_NODES). */
  env: Record<string, string>;
  /** CLIENT PAUSE for `ms` (on every node): every client's commands wait, the gateways' time out. */
  pause(ms: number): Promise<void>;
  /** Stopped and started again on its data; says what was restarted. */
  restart(): Promise<string>;
  stop(): Promise<void>;
}

/** One inline command; its first reply line, or '' when the server closed the connection without one. */
export function inlineCommand(port: number, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    socket.setTimeout(5_000, () => socket.destroy(new Error(`no reply to ${command} within 5 s`)));
    socket.once('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) socket.end();
    });
    socket.once('error', reject);
    socket.once('close', () => resolve(reply.split('\r\n')[0] ?? ''));
  });
}

/** A redis-server on a fixed port and directory, so that it can stop and come back with its data. */
export class PersistentRedis implements FaultedStore {
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-leases-redis-'));

  private constructor(
    readonly port: number,
    private readonly extraArgs: readonly string[],
  ) {}

  /** `extraArgs`: more redis-server arguments (a Cluster node's). */
  static async start(extraArgs: readonly string[] = [], port?: number): Promise<PersistentRedis> {
    const startOn = async (chosenPort: number) => {
      const redis = new PersistentRedis(chosenPort, extraArgs);
      try {
        await redis.spawn();
        return redis;
      } catch (err) {
        fs.rmSync(redis.dir, { recursive: true, force: true });
        throw err;
      }
    };
    // A drawn port another worker took before the server listened: drawn again (as startRedisServer does).
    return port === undefined ? drawingPortsAgain(async () => startOn(await freePort())) : startOn(port);
  }

  get env(): Record<string, string> {
    return { REDIS_URL: `redis://127.0.0.1:${this.port}` };
  }

  command(command: string): Promise<string> {
    return inlineCommand(this.port, command);
  }

  async pause(ms: number): Promise<void> {
    await this.command(`CLIENT PAUSE ${ms} ALL`);
  }

  /** SHUTDOWN SAVE, then the same server on the same port and directory: it reloads its data. */
  async restart(): Promise<string> {
    // The server answers nothing: it saves, closes the socket and exits (the reply is its exit).
    const reply = await this.command('SHUTDOWN SAVE');
    if (reply.startsWith('-')) throw new Error(`SHUTDOWN SAVE refused: ${reply}`);
    await this.exited;
    await this.spawn();
    return `Redis :${this.port} SHUTDOWN SAVE, restarted on its data`;
  }

  async stop(): Promise<void> {
    this.child?.kill('SIGKILL');
    await this.exited;
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  private async spawn(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir];
    const persistence = ['--appendonly', 'yes', '--appendfsync', 'always', '--save', ''];
    // A log of this start only: its ready line (not another process answering on the port), or why it exited.
    const logPath = path.join(this.dir, 'redis-server.log');
    const child = spawnLoggedRedis([...args, ...persistence, ...this.extraArgs], logPath);
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    const log = () => fs.readFileSync(logPath, 'utf8');
    const what = `redis-server on port ${this.port}`;
    await eventually(
      async () => {
        const failure = exitedAtStart(child, logPath, what);
        if (failure) throw failure;
        return log().includes(READY_LINE) && (await this.command('PING').catch(() => '')).startsWith('+PONG');
      },
      { timeoutMs: 10_000, what: () => `${what} ready and answering PING; its log:\n${log().slice(-2000)}` },
    );
  }
}

/**
 * A Cluster of three masters (no replicas), each a PersistentRedis with its nodes.conf in its own
 * directory, so that a master restarted on its data rejoins as itself. `restart` restarts the
 * masters in turn, one per call.
 */
export class PersistentCluster implements FaultedStore {
  private restarts = 0;

  private constructor(private readonly nodes: PersistentRedis[]) {}

  static async start(): Promise<PersistentCluster> {
    const nodes = await PersistentCluster.startNodes();
    const cluster = new PersistentCluster(nodes);
    await clusterCreate(nodes.map((node) => `127.0.0.1:${node.port}`));
    await cluster.untilOk();
    return cluster;
  }

  /** Three cluster-enabled nodes on six drawn ports; all six drawn again when another worker took one first. */
  private static startNodes(): Promise<PersistentRedis[]> {
    return drawingPortsAgain(async () => {
      const ports = new Set<number>();
      while (ports.size < 6) ports.add(await freePort());
      const [a, b, c, busA, busB, busC] = [...ports];
      const nodeArgs = (bus: number) => [
        ...['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-port', String(bus)],
        ...['--cluster-announce-ip', '127.0.0.1', '--cluster-node-timeout', '5000'],
      ];
      const started = await Promise.allSettled([
        PersistentRedis.start(nodeArgs(busA!), a),
        PersistentRedis.start(nodeArgs(busB!), b),
        PersistentRedis.start(nodeArgs(busC!), c),
      ]);
      const nodes = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
      const failed = started.find((result): result is PromiseRejectedResult => result.status === 'rejected');
      if (!failed) return nodes;
      await Promise.all(nodes.map((node) => node.stop()));
      throw failed.reason;
    });
  }

  get env(): Record<string, string> {
    return { REDIS_CLUSTER_NODES: this.nodes.map((node) => `127.0.0.1:${node.port}`).join(',') };
  }

  async pause(ms: number): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.pause(ms)));
  }

  async restart(): Promise<string> {
    const node = this.nodes[this.restarts++ % this.nodes.length]!;
    const what = await node.restart();
    await this.untilOk();
    return `Cluster master ${what.slice('Redis '.length)}`;
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.stop()));
  }

  private async untilOk(): Promise<void> {
    await eventually(async () => (await Promise.all(this.nodes.map((node) => clusterStateOk(node)))).every(Boolean), {
      timeoutMs: 60_000,
      pollMs: 100,
      what: 'every master of the test Cluster at cluster_state:ok',
    });
  }
}

/** CLUSTER INFO is a bulk reply: read it whole (inlineCommand keeps the first line only). */
function clusterStateOk(node: PersistentRedis): Promise<boolean> {
  return new Promise((resolve) => {
    execFile('redis-cli', ['-p', String(node.port), 'CLUSTER', 'INFO'], { timeout: 5_000 }, (err, stdout) =>
      resolve(!err && String(stdout).includes('cluster_state:ok')),
    );
  });
}

function clusterCreate(nodes: string[]): Promise<void> {
  const args = ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'];
  return new Promise((resolve, reject) =>
    execFile('redis-cli', args, { timeout: 60_000 }, (err, stdout, stderr) =>
      err || !String(stdout).includes('All 16384 slots covered')
        ? reject(new Error(`redis-cli --cluster create failed: ${err?.message ?? ''}\n${stdout}\n${stderr}`))
        : resolve(),
    ),
  );
}
