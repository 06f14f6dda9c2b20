import { nodeVersion } from './shared/supported-runtime';
import './tracing';
import cluster from 'node:cluster';
import { loadConfig, ConfigError, type Config } from './shared/config';
import { tracing } from './shared/telemetry/telemetry';
import { createLogger, type Logger } from './shared/logger';
import { startProduct } from './product';
import { createStopper, greetDeveloper, startupFailureLine, stopOnSignals } from './lifecycle';
import { runSupervisor } from './workers/supervisor';
import { runWorker } from './workers/worker';
import { workerCount } from './workers/worker-count';

/** WORKERS=1: the whole product in this one process. */
async function runSingleProcess(config: Config, logger: Logger): Promise<void> {
  let product;
  try {
    product = await startProduct(config, { logger });
  } catch (err) {
    process.stderr.write(`${startupFailureLine(err)}\n`);
    process.exit(1);
  }
  const running = product;
  logger.info(
    {
      gateway: running.gatewayUrl,
      admin: running.adminUrl,
      ...(running.authzUrl ? { authz: running.authzUrl } : {}),
      inventory: running.inventory?.url ?? config.upstream.url,
      node: nodeVersion,
    },
    `listening on Node ${nodeVersion}`,
  );
  stopOnSignals(createStopper(() => running.close(), logger, config.server.shutdownTimeoutMs));
  // CONTRACT §2: SIGHUP re-reads the config and the TLS files (the outcome is logged by the reload).
  process.on('SIGHUP', () => void running.reload('SIGHUP'));
  if (config.env === 'development') await greetDeveloper(config, running);
}

/** Reads the configuration and starts what this process runs: the product, or a supervisor and its workers. */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    const problems =
      err instanceof ConfigError ? err.problems : [`cannot load the configuration: ${(err as Error).message}`];
    process.stderr.write(problems.map((problem) => `animal-store-gateway: ${problem}\n`).join(''));
    process.exit(1);
  }
  const logger = createLogger(config.logLevel, undefined, { keyPrefix: config.keys.prefix, traceFields: tracing() });
  const workers = workerCount(config.workers);
  if (cluster.isWorker) await runWorker(config, logger, workers);
  else if (workers > 1) await runSupervisor(config, logger, workers);
  else await runSingleProcess(config, logger);
}

// Whatever escapes main is still one line, never a stack trace (CONTRACT §2).
main().catch((err: unknown) => {
  process.stderr.write(`animal-store-gateway: ${(err as Error).message}\n`);
  process.exit(1);
});
