import fs from 'node:fs';
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
 * (`src/main.ts`, as `npm start` runs it) on a store of the test's own (persistent-redis.ts).
 */

/** What every instance of one fleet shares: its Redis, namespace and config file. */
export interface FleetSettings {
  /** REDIS_URL or REDIS_CLUSTER_NODES (FaultedStore.env). */
  storeEnv: Record<string, string>;
  /** The YAML every instance reads (CONFIG_FILE); SIGHUP reads it again. */
  configYaml: string;
}

/** The config the harness runs under: fail closed, short Redis timeout, no bans, one operation costing 3. */
/** What makes a key busy in the harness (50 by default): its clients send tens of requests a second over four processes. */
export const HARNESS_BUSY_REQUESTS_PER_SECOND = 5;

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
    // Leases on (the default) for keys at the clients' rates: a few requests per second per process.
    'rateLimit:',
    '  leases:',
    '    enabled: true',
    `    busyRequestsPerSecond: ${HARNESS_BUSY_REQUESTS_PER_SECOND}`,
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
      ...settings.storeEnv,
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
