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
  process.stdout.write(`\nanimal-store-gateway (${config.env}) is ready on ${product.gatewayUrl}\n${lines.map((l) => `  ${l}`).join('\n')}\n\n`);
}

function installSignalHandlers(product: RunningProduct, logger: Logger): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
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
    if (err instanceof ConfigError) {
      process.stderr.write(`animal-store-gateway: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
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
  logger.info({ gateway: product.gatewayUrl, admin: product.adminUrl, inventory: product.inventory?.url ?? config.upstream.url }, 'listening');
  installSignalHandlers(product, logger);
  if (config.env === 'development') await greetDeveloper(config, product);
}

void main();
