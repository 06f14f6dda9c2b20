import cluster, { type Worker } from 'node:cluster';
import type { Config } from '../shared/config';
import { exitAfterLogs, type Logger } from '../shared/logger';
import { nodeVersion } from '../shared/supported-runtime';
import { resolveSigningSecret } from '../shared/upstream-token';
import { startInventory, type RunningInventory } from '../inventory';
import { resolveAdminToken } from '../product';
import { startupFailureLine } from '../lifecycle';
import { answerClusterMetrics } from './cluster-metrics';
import { answerClusterStats } from './cluster-stats';
import { isMessage, type SupervisorMessage, type WorkerMessage } from './messages';
import { restartDelayMs } from './worker-count';

/** How long past server.shutdownTimeoutMs the workers may take to drain before they are killed. */
const SHUTDOWN_BACKSTOP_MARGIN_MS = 5000;
/** A worker that served this long before dying was not crash-looping: the next restart is immediate. */
const HEALTHY_LIFETIME_MS = 30_000;

function tell(worker: Worker, message: SupervisorMessage): void {
  if (worker.isConnected()) worker.send(message);
}

/**
 * WORKERS > 1: this process serves nothing itself. It writes the development secrets once, runs
 * the embedded inventory (one SQLite writer for all), forks the workers (Node's cluster module: they
 * share both listeners, connections spread round-robin), sums their metrics, replaces a worker that
 * dies (with a backoff while they keep dying) and, on SIGTERM or SIGINT, has every worker drain and
 * exits 0 once all have.
 */
export async function runSupervisor(config: Config, logger: Logger, workerCount: number): Promise<void> {
  const log = logger.child({ role: 'supervisor' });
  // Generated on a first start in development; written here so that no two workers race to create them.
  resolveAdminToken(config);
  resolveSigningSecret(config.signing.secret, config.dataDir);

  let inventory: RunningInventory | null = null;
  const workerEnv: Record<string, string> = {};
  if (!config.upstream.url) {
    try {
      inventory = await startInventory(config, { logger: logger.child({ component: 'inventory' }), host: '127.0.0.1' });
    } catch (err) {
      process.stderr.write(`${startupFailureLine(err)}\n`);
      process.exit(1);
    }
    workerEnv.INVENTORY_URL = inventory.url;
  }
  answerClusterMetrics(inventory ? [inventory.metrics] : []);
  answerClusterStats();

  let started = false;
  let stopping = false;
  let earlyDeaths = 0;
  const readyAt = new Map<Worker, number>();

  const fork = () => cluster.fork(workerEnv);
  const closeInventory = async () => {
    await inventory?.close();
    inventory = null;
  };

  const failStartup = (line: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`${line}\n`);
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGKILL');
    void closeInventory().finally(() => process.exit(1));
  };

  cluster.on('message', (worker, message: unknown) => {
    if (isMessage<Extract<WorkerMessage, { type: 'asg:ready' }>>(message, 'asg:ready')) {
      readyAt.set(worker, Date.now());
      log.info({ worker: worker.id, pid: worker.process.pid }, 'worker ready');
      if (!started && readyAt.size === workerCount) {
        started = true;
        log.info(
          { workers: workerCount, gateway: message.gatewayUrl, admin: message.adminUrl, inventory: inventory?.url ?? config.upstream.url, node: nodeVersion },
          `listening on Node ${nodeVersion} with ${workerCount} workers`,
        );
        if (config.env === 'development') tell(worker, { type: 'asg:greet' });
      }
    } else if (isMessage<Extract<WorkerMessage, { type: 'asg:startup-failed' }>>(message, 'asg:startup-failed')) {
      if (!started) failStartup(message.line);
      else log.error({ worker: worker.id, reason: message.line }, 'a replacement worker could not start');
    }
  });

  cluster.on('exit', (worker, code, signal) => {
    const servedMs = Date.now() - (readyAt.get(worker) ?? Date.now());
    readyAt.delete(worker);
    if (stopping) return;
    if (!started) {
      failStartup(`animal-store-gateway: cannot start: worker ${worker.id} exited (${signal ?? `code ${code}`}) before it was ready`);
      return;
    }
    earlyDeaths = servedMs >= HEALTHY_LIFETIME_MS ? 1 : earlyDeaths + 1;
    const delayMs = restartDelayMs(earlyDeaths);
    log.error({ worker: worker.id, pid: worker.process.pid, code, signal, restartInMs: delayMs }, 'worker died: replacing it');
    setTimeout(() => {
      if (!stopping) fork();
    }, delayMs);
  });

  const stop = (reason: string) => {
    if (stopping) {
      log.warn({ signal: reason }, 'second signal: exiting now');
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGKILL');
      process.exit(1);
    }
    stopping = true;
    log.info({ reason, workers: Object.keys(cluster.workers ?? {}).length }, 'shutting down: draining every worker');
    const backstop = setTimeout(() => {
      log.error({ shutdownTimeoutMs: config.server.shutdownTimeoutMs }, 'workers did not finish: killing them');
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGKILL');
      process.exit(1);
    }, config.server.shutdownTimeoutMs + SHUTDOWN_BACKSTOP_MARGIN_MS);
    backstop.unref();
    const exits = Object.values(cluster.workers ?? {}).map(
      (worker) =>
        new Promise<number>((resolve) => {
          worker!.once('exit', (code: number | null) => resolve(code ?? 1));
          tell(worker!, { type: 'asg:stop' });
        }),
    );
    void Promise.all(exits).then(async (codes) => {
      await closeInventory();
      exitAfterLogs(log, codes.every((code) => code === 0) ? 0 : 1);
    });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  for (let i = 0; i < workerCount; i++) fork();
}
