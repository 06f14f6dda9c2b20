import { nodeVersion } from '../shared/supported-runtime';
import './tracing';
import { tracing } from '../shared/telemetry/telemetry';
import { INVENTORY_SERVICE } from '../shared/constants';
import { ConfigError, loadConfig, type Config } from '../shared/config';
import { createLogger } from '../shared/logger';
import { ReadOnlyDataDirError } from '../shared/sqlite/sqlite-failures';
import { startInventory } from './server';

/** The inventory on its own (`npm run start:inventory`): config, listen, stop cleanly on a signal. */
async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig({ role: 'inventory' });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exitCode = 1;
    return;
  }
  const logger = createLogger(config.logLevel, undefined, {
    service: INVENTORY_SERVICE,
    keyPrefix: config.keys.prefix,
    traceFields: tracing(),
  });

  let inventory;
  try {
    inventory = await startInventory(config, { logger, port: config.inventory.port, collectDefaultMetrics: true });
  } catch (err) {
    if (err instanceof ReadOnlyDataDirError) {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 1;
      return;
    }
    logger.fatal({ err }, 'inventory failed to start');
    process.exitCode = 1;
    return;
  }
  logger.info(
    { url: inventory.url, port: inventory.port, node: nodeVersion },
    `inventory listening on ${inventory.url} (Node ${nodeVersion})`,
  );

  let stopping = false;
  const shutdown = (signal: NodeJS.Signals): void => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'inventory shutting down');
    inventory
      .close()
      .then(() => tracing()?.shutdown())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          logger.error({ err }, 'inventory did not close cleanly');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

main().catch((err: unknown) => {
  process.stderr.write(`inventory: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
