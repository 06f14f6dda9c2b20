import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../support/redis-server';
import { eventually } from '../../support/eventually';
import {
  isolatedEnv,
  LONG_ADMIN_TOKEN,
  LONG_SIGNING_SECRET,
  startMain,
  tempFile,
  type MainProcess,
} from '../startup/startup-kit';

/**
 * The fleet the window-invariant harness runs and breaks: gateway instances as real processes
 * (`src/main.ts`, as `npm start` runs it) on one redis-server of the test's own, which keeps its
 * data across a restart (append-only file, fsync always, and SHUTDOWN SAVE).
 */

/** A redis-server on a fixed port and directory, so that it can stop and come back with its data. */
export class PersistentRedis {
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-leases-redis-'));

  private constructor(readonly port: number) {}

  static async start(): Promise<PersistentRedis> {
    const redis = new PersistentRedis(await freePort());
    await redis.spawn();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** One inline command; its first reply line, or '' when the server closed the connection without one. */
  command(command: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(this.port, '127.0.0.1');
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

  /** CLIENT PAUSE for `ms`: every client's commands wait (the gateways' time out). */
  async pause(ms: number): Promise<void> {
    await this.command(`CLIENT PAUSE ${ms} ALL`);
  }

  /** SHUTDOWN SAVE, then the same server on the same port and directory: it reloads its data. */
  async restart(): Promise<void> {
    // The server answers nothing: it saves, closes the socket and exits (the reply is its exit).
    const reply = await this.command('SHUTDOWN SAVE');
    if (reply.startsWith('-')) throw new Error(`SHUTDOWN SAVE refused: ${reply}`);
    await this.exited;
    await this.spawn();
  }

  async stop(): Promise<void> {
    this.child?.kill('SIGKILL');
    await this.exited;
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  private async spawn(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir];
    const persistence = ['--appendonly', 'yes', '--appendfsync', 'always', '--save', ''];
    const child = spawn('redis-server', [...args, ...persistence], { stdio: 'ignore' });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    await eventually(async () => (await this.command('PING').catch(() => '')).startsWith('+PONG'), {
      timeoutMs: 10_000,
      what: `redis-server on port ${this.port} answering PING`,
    });
  }
}

/** What every instance of one fleet shares: its Redis, namespace and config file. */
export interface FleetSettings {
  redisUrl: string;
  /** The YAML every instance reads (CONFIG_FILE); SIGHUP reads it again. */
  configYaml: string;
}

/** The config the harness runs under: fail closed, short Redis timeout, no bans, one operation costing 3. */
export function harnessConfigYaml(namespace: string, opCost: number): string {
  return [
    'redis:',
    `  namespace: "${namespace}"`,
    // Short enough that a 1.5 s CLIENT PAUSE is an outage the store's fail mode decides.
    '  commandTimeoutMs: 500',
    'store:',
    '  failMode: closed',
    // Clients exceed their limits on purpose: a ban would stop them and hide the windows.
    'ban:',
    '  threshold: 1000000',
    '  windowSeconds: 60',
    '  durationSeconds: 60',
    'costs:',
    `  - { method: GET, path: "/pets/{petId}", cost: ${opCost} }`,
    '',
  ].join('\n');
}

const LISTENING = /"msg":"listening on Node v[\d.]+( with \d+ workers)?"/;

/** One gateway instance: a supervisor with `workers` workers (or one process), restartable on the same ports and data. */
export class GatewayInstance {
  private main: MainProcess | null = null;
  private starts = 0;

  private constructor(
    readonly name: string,
    readonly workers: number,
    private readonly env: Record<string, string>,
  ) {}

  static async create(name: string, workers: number, settings: FleetSettings): Promise<GatewayInstance> {
    const env = await isolatedEnv({
      APP_ENV: 'staging',
      ADMIN_TOKEN: LONG_ADMIN_TOKEN,
      SIGNING_SECRET: LONG_SIGNING_SECRET,
      REDIS_URL: settings.redisUrl,
      WORKERS: String(workers),
      CONFIG_FILE: tempFile('leases.yaml', settings.configYaml),
    });
    return new GatewayInstance(name, workers, env);
  }

  /**
   * Created and started; on free ports drawn again when another process took one between the draw
   * and the listen (8 helpers' suites share this machine), up to three times.
   */
  static async started(name: string, workers: number, settings: FleetSettings): Promise<GatewayInstance> {
    for (let attempt = 1; ; attempt++) {
      const instance = await GatewayInstance.create(name, workers, settings);
      try {
        await instance.start();
        return instance;
      } catch (error) {
        await instance.stop();
        if (attempt === 3 || !/port is already in use/.test(String(error))) throw error;
      }
    }
  }

  get gatewayUrl(): string {
    return `http://127.0.0.1:${this.env.PORT}`;
  }

  get adminUrl(): string {
    return `http://127.0.0.1:${this.env.ADMIN_PORT}`;
  }

  get restarts(): number {
    return Math.max(0, this.starts - 1);
  }

  async start(): Promise<void> {
    this.main = startMain(this.env);
    this.starts++;
    await this.main.waitForStdout(LISTENING);
  }

  /** SIGKILL of the whole instance (the supervisor and its workers die with their process group only if killed too). */
  async kill(): Promise<void> {
    const main = this.main;
    if (!main || main.child.exitCode !== null || main.child.signalCode !== null) return;
    const workers = this.workerPids();
    main.child.kill('SIGKILL');
    for (const pid of workers) signal(pid, 'SIGKILL');
    await main.exited;
  }

  /** SIGKILL of one worker; its supervisor forks another. Returns the pid killed. */
  killWorker(): number {
    const [pid] = this.workerPids();
    if (pid === undefined) throw new Error(`${this.name} has no live worker to kill`);
    signal(pid, 'SIGKILL');
    return pid;
  }

  /** SIGHUP: the config read again (CONTRACT §5 reload). */
  reload(): void {
    this.main?.child.kill('SIGHUP');
  }

  /** Pids of this instance's workers still alive, from its "worker ready" lines. */
  workerPids(): number[] {
    if (!this.main || this.workers < 2) return [];
    const pids = this.main
      .stdout()
      .split('\n')
      .filter((line) => line.includes('"msg":"worker ready"'))
      .map((line) => readPid(line))
      .filter((pid): pid is number => pid !== null);
    return [...new Set(pids)].filter((pid) => signal(pid, 0));
  }

  stdout(): string {
    return this.main?.stdout() ?? '';
  }

  async stop(): Promise<void> {
    await this.kill();
    fs.rmSync(this.env.DATA_DIR!, { recursive: true, force: true });
  }
}

/** The `pid` of a JSON log line (the worker's own: it comes after the base fields); null for a line cut short. */
function readPid(line: string): number | null {
  try {
    return (JSON.parse(line) as { pid: number }).pid;
  } catch {
    return null;
  }
}

/** process.kill that answers whether the process was there. */
function signal(pid: number, sig: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}
