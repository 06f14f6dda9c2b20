import cluster, { type Worker } from 'node:cluster';
import type { Config } from '../shared/config';
import { exitAfterLogs, type Logger } from '../shared/logger';
import { nodeVersion } from '../shared/supported-runtime';
import { resolveSigningSecret } from '../shared/http/upstream-token';
import { startInventory, type RunningInventory } from '../inventory';
import { resolveAdminToken } from '../product';
import { startupFailureLine } from '../lifecycle';
import { answerClusterMetrics } from './cluster-metrics';
import { answerClusterStats } from './cluster-stats';
import { superviseReloads } from './cluster-reload';
import { ConfigState } from '../product/reload/config-state';
import { Registry } from 'prom-client';
import { enforceLabelAllowlist, LabelAllowlist } from '../shared/metrics/metric-labels';
import { isMessage, type SupervisorMessage, type WorkerMessage } from './messages';
import { restartDelayMs } from './worker-count';
import { assertPortsFree } from './port-probe';

/** How long past server.shutdownTimeoutMs the workers may take to drain before they are killed. */
const SHUTDOWN_BACKSTOP_MARGIN_MS = 5000;
/** A worker that served this long before dying was not crash-looping: the next restart is immediate. */
const HEALTHY_LIFETIME_MS = 30_000;

function tell(worker: Worker, message: SupervisorMessage): void {
  if (worker.isConnected()) worker.send(message);
}

/**
 * WORKERS > 1: this process serves nothing itself, and accepts no connection (each worker binds its
 * own sockets with SO_REUSEPORT: product/listen.ts). It writes the development secrets once, runs
 * the embedded inventory (one SQLite writer for all), forks the workers (Node's cluster module; the
 * kernel spreads new connections over the workers' sockets), sums their metrics, replaces a worker that
 * dies (with a backoff while they keep dying) and, on SIGTERM or SIGINT, has every worker drain and
 * exits 0 once all have.
 */
export async function runSupervisor(config: Config, logger: Logger, workerCount: number): Promise<void> {
  const log = logger.child({ role: 'supervisor' });
  // Generated on a first start in development; written here so that no two workers race to create them.
  resolveAdminToken(config);
  resolveSigningSecret(config.signing.secret, config.dataDir);
  try {
    await assertPortsFree([
      { port: config.server.port, host: config.server.host },
      { port: config.server.adminPort, host: config.server.adminHost },
      ...(config.server.authzPort === null
        ? []
        : [{ port: config.server.authzPort, host: config.server.authzHost ?? config.server.host }]),
    ]);
  } catch (err) {
    process.stderr.write(`${startupFailureLine(err)}\n`);
    process.exit(1);
  }

  // The config in force here: what the embedded inventory reads (server.maxBodyBytes), replaced by each reload.
  const configState = new ConfigState(config);
  let inventory: RunningInventory | null = null;
  const workerEnv: Record<string, string> = {};
  if (!config.upstream.url) {
    try {
      inventory = await startInventory(config, {
        logger: logger.child({ component: 'inventory' }),
        host: '127.0.0.1',
        configInForce: () => configState.config,
      });
    } catch (err) {
      process.stderr.write(`${startupFailureLine(err)}\n`);
      process.exit(1);
    }
    workerEnv.INVENTORY_URL = inventory.url;
  }
  const reloadMetrics = new Registry();
  answerClusterMetrics(inventory ? [inventory.metrics, reloadMetrics] : [reloadMetrics]);
  answerClusterStats();
  const reloads = superviseReloads(configState, log, reloadMetrics);
  enforceLabelAllowlist(reloadMetrics, new LabelAllowlist());

  const supervisor = new Supervisor(config, log, workerCount, inventory, workerEnv, (worker) =>
    reloads.onWorkerReady(worker),
  );
  cluster.on('message', (worker, message: unknown) => supervisor.onMessage(worker, message));
  cluster.on('exit', (worker, code, signal) => supervisor.onExit(worker, code, signal));
  process.on('SIGTERM', () => supervisor.stop('SIGTERM'));
  process.on('SIGINT', () => supervisor.stop('SIGINT'));
  process.on('SIGHUP', () => void reloads.reload('SIGHUP'));
  for (let i = 0; i < workerCount; i++) supervisor.fork();
}

function killAllWorkers(): void {
  for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGKILL');
}

/** The supervisor's state: which workers are ready, whether it has started or is stopping, and its restarts. */
class Supervisor {
  private started = false;
  private stopping = false;
  private earlyDeaths = 0;
  private readonly readyAt = new Map<Worker, number>();

  constructor(
    private readonly config: Config,
    private readonly log: Logger,
    private readonly workerCount: number,
    private inventory: RunningInventory | null,
    private readonly workerEnv: Record<string, string>,
    private readonly onWorkerReady: (worker: Worker) => void,
  ) {}

  fork(): void {
    cluster.fork(this.workerEnv);
  }

  onMessage(worker: Worker, message: unknown): void {
    if (isMessage<Extract<WorkerMessage, { type: 'asg:ready' }>>(message, 'asg:ready')) {
      this.readyAt.set(worker, Date.now());
      this.onWorkerReady(worker);
      this.log.info({ worker: worker.id, pid: worker.process.pid }, 'worker ready');
      if (this.started || this.readyAt.size !== this.workerCount) return;
      this.started = true;
      this.log.info(
        {
          workers: this.workerCount,
          gateway: message.gatewayUrl,
          admin: message.adminUrl,
          inventory: this.inventory?.url ?? this.config.upstream.url,
          node: nodeVersion,
        },
        `listening on Node ${nodeVersion} with ${this.workerCount} workers`,
      );
      if (this.config.env === 'development') tell(worker, { type: 'asg:greet' });
    } else if (isMessage<Extract<WorkerMessage, { type: 'asg:startup-failed' }>>(message, 'asg:startup-failed')) {
      if (!this.started) this.failStartup(message.line);
      else this.log.error({ worker: worker.id, reason: message.line }, 'a replacement worker could not start');
    }
  }

  /** A worker that dies is replaced, with a backoff while they keep dying early. */
  onExit(worker: Worker, code: number, signal: string): void {
    const servedMs = Date.now() - (this.readyAt.get(worker) ?? Date.now());
    this.readyAt.delete(worker);
    if (this.stopping) return;
    if (!this.started) {
      this.failStartup(
        `animal-store-gateway: cannot start: worker ${worker.id} exited (${signal ?? `code ${code}`}) before it was ready`,
      );
      return;
    }
    this.earlyDeaths = servedMs >= HEALTHY_LIFETIME_MS ? 1 : this.earlyDeaths + 1;
    const delayMs = restartDelayMs(this.earlyDeaths);
    this.log.error(
      { worker: worker.id, pid: worker.process.pid, code, signal, restartInMs: delayMs },
      'worker died: replacing it',
    );
    setTimeout(() => {
      if (!this.stopping) this.fork();
    }, delayMs);
  }

  /** Every worker drains; exit 0 once all have, 1 if one failed or they outlast the backstop. A second signal exits at once. */
  stop(reason: string): void {
    if (this.stopping) {
      this.log.warn({ signal: reason }, 'second signal: exiting now');
      killAllWorkers();
      process.exit(1);
    }
    this.stopping = true;
    this.log.info(
      { reason, workers: Object.keys(cluster.workers ?? {}).length },
      'shutting down: draining every worker',
    );
    const shutdownTimeoutMs = this.config.server.shutdownTimeoutMs;
    setTimeout(() => {
      this.log.error({ shutdownTimeoutMs }, 'workers did not finish: killing them');
      killAllWorkers();
      process.exit(1);
    }, shutdownTimeoutMs + SHUTDOWN_BACKSTOP_MARGIN_MS).unref();
    const exits = Object.values(cluster.workers ?? {}).map(
      (worker) =>
        new Promise<number>((resolve) => {
          worker!.once('exit', (code: number | null) => resolve(code ?? 1));
          tell(worker!, { type: 'asg:stop' });
        }),
    );
    void Promise.all(exits).then(async (codes) => {
      await this.closeInventory();
      exitAfterLogs(this.log, codes.every((code) => code === 0) ? 0 : 1);
    });
  }

  private failStartup(line: string): void {
    if (this.stopping) return;
    this.stopping = true;
    process.stderr.write(`${line}\n`);
    killAllWorkers();
    void this.closeInventory().finally(() => process.exit(1));
  }

  private async closeInventory(): Promise<void> {
    await this.inventory?.close();
    this.inventory = null;
  }
}
