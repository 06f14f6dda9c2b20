import type { Config } from '../shared/config';
import type { Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { startInventory, type RunningInventory } from '../inventory';
import type { Closers } from './closers';

/**
 * The inventory this process runs itself when `upstream.url` is not set (null when it is). Only
 * this process talks to it, so it listens on loopback only.
 */
export async function startEmbeddedInventory(
  config: Config,
  options: { logger: Logger; clock: Clock; port?: number; closers: Closers; configInForce: () => Config },
): Promise<RunningInventory | null> {
  if (config.upstream.url) return null;
  const inventory = await startInventory(config, {
    logger: options.logger.child({ component: 'inventory' }),
    clock: options.clock,
    port: options.port,
    host: '127.0.0.1',
    configInForce: options.configInForce,
  });
  options.closers.add(() => inventory.close());
  return inventory;
}
