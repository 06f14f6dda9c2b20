import { nodeVersion } from './shared/supported-runtime';
import { loadConfig, ConfigError, type Config } from './shared/config';
import { createLogger, type Logger } from './shared/logger';
import { startProduct, type RunningProduct } from './product';

/** In development, a first start leaves the user one command away from a real response. */
async function greetDeveloper(config: Config, product: RunningProduct): Promise<void> {
  const lines = [`admin token: ${product.adminToken}`, `admin API:   ${product.adminUrl}/admin/keys`];
  if ((await product.keys.list()).length === 0) {
    const { key, record } = await product.keys.create({ name: 'development', plan: 'pro' });
    lines.push(
      `created API key ${record.id} on plan ${record.plan} (shown once):`,
      `  ${key}`,
      `try it:`,
      `  curl -H "Authorization: Bearer ${key}" ${product.gatewayUrl}/v1/pets`,
    );
  }
  process.stdout.write(`\nanimal-store-gateway (${config.env}, Node ${nodeVersion}) is ready on ${product.gatewayUrl}\n${lines.map((l) => `  ${l}`).join('\n')}\n\n`);
}

/** How long past server.shutdownTimeoutMs a stop may take before the process exits regardless. */
const SHUTDOWN_BACKSTOP_MARGIN_MS = 5000;

function installSignalHandlers(product: RunningProduct, logger: Logger, shutdownTimeoutMs: number): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    // close() cuts connections still open after server.shutdownTimeoutMs; this is the backstop for
    // anything else that hangs (a store that never answers its QUIT), so a stop always ends.
    setTimeout(() => {
      logger.error({ shutdownTimeoutMs }, 'shutdown did not finish: exiting now');
      process.exit(1);
    }, shutdownTimeoutMs + SHUTDOWN_BACKSTOP_MARGIN_MS).unref();
    product.close().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    const problems = err instanceof ConfigError ? err.problems : [`cannot load the configuration: ${(err as Error).message}`];
    process.stderr.write(problems.map((problem) => `animal-store-gateway: ${problem}\n`).join(''));
    process.exit(1);
  }
  const logger = createLogger(config.logLevel);
  let product: RunningProduct;
  try {
    product = await startProduct(config, { logger });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const reason = e.code === 'EADDRINUSE' ? `a port is already in use (${e.message})` : e.message;
    process.stderr.write(`animal-store-gateway: cannot start: ${reason}\n`);
    process.exit(1);
  }
  logger.info(
    { gateway: product.gatewayUrl, admin: product.adminUrl, inventory: product.inventory?.url ?? config.upstream.url, node: nodeVersion },
    `listening on Node ${nodeVersion}`,
  );
  installSignalHandlers(product, logger, config.server.shutdownTimeoutMs);
  if (config.env === 'development') await greetDeveloper(config, product);
}

// Whatever escapes main is still one line, never a stack trace (CONTRACT §2).
main().catch((err: unknown) => {
  process.stderr.write(`animal-store-gateway: ${(err as Error).message}\n`);
  process.exit(1);
});
