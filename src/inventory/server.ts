import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Registry } from 'prom-client';
import type { Config } from '../shared/config';
import { systemClock, type Clock } from '../shared/clock';
import { closeServer } from '../shared/http/close-server';
import { createLogger, type Logger } from '../shared/logger';
import { tracing } from '../shared/telemetry/telemetry';
import { INVENTORY_SERVICE } from '../shared/constants';
import { UpstreamTokenVerifier, resolveSigningSecret } from '../shared/http/upstream-token';
import { createInventoryApp } from './app';
import { openInventoryDatabase } from './database';
import { createInventoryMetrics } from './metrics';
import { SqlitePetRepository } from './pet-repository';
import { VerifiedTokenCache } from './verified-token-cache';

export interface StartInventoryOptions {
  logger?: Logger;
  clock?: Clock;
  /** Defaults to config.inventory.port; 0 picks a free port. */
  port?: number;
  /** Defaults to config.server.host. */
  host?: string;
  /**
   * Also report prom-client's default process metrics. Only for the inventory in its own process
   * (src/inventory/main.ts); embedded, the gateway's registry already has them.
   */
  collectDefaultMetrics?: boolean;
  /**
   * The config in force, asked on every request for what a reload may change (server.maxBodyBytes):
   * the embedding process's. Default: the config it started with.
   */
  configInForce?: () => Config;
}

export interface RunningInventory {
  server: http.Server;
  port: number;
  /** Base URL to reach it from this machine, e.g. http://127.0.0.1:8090. */
  url: string;
  /**
   * The inventory's metrics (served at `<url>/metrics`), for a host process to merge into its own
   * /metrics, e.g. with Registry.merge. Holds no default process metrics unless asked for.
   */
  metrics: Registry;
  /** Throws when the database cannot take a write now (the check behind /readyz; the embedding gateway's /readyz runs it too). */
  checkWrites(): void;
  /** Stops accepting, lets requests in flight finish (up to config.server.shutdownTimeoutMs), closes the database. */
  close(): Promise<void>;
}

/** Where the pets live: `<dataDir>/<inventory.databaseFile>`. */
export function inventoryDatabasePath(config: Config): string {
  return path.resolve(config.dataDir, config.inventory.databaseFile);
}

/**
 * Room for what the gateway adds to a request it forwards (its signed token, X-Request-Id,
 * X-Forwarded-*: about 0.5 KiB), so that the inventory takes every request the gateway takes.
 */
const GATEWAY_HEADER_ALLOWANCE_BYTES = 4096;

export async function startInventory(config: Config, options: StartInventoryOptions = {}): Promise<RunningInventory> {
  const logger =
    options.logger ??
    createLogger(config.logLevel, undefined, {
      service: INVENTORY_SERVICE,
      keyPrefix: config.keys.prefix,
      traceFields: tracing(),
    });
  const clock = options.clock ?? systemClock;
  const host = options.host ?? config.server.host;
  const secret = resolveSigningSecret(config.signing.secret, config.dataDir);
  const verifier = new VerifiedTokenCache(new UpstreamTokenVerifier({ ...config.signing, secret }, clock), clock);
  const metrics = createInventoryMetrics(new Registry(), { collectDefaults: options.collectDefaultMetrics ?? false });
  const repository = new SqlitePetRepository(
    openInventoryDatabase(inventoryDatabasePath(config), config.storage.busyTimeoutMs),
    clock,
    metrics,
  );
  const inForce = options.configInForce ?? (() => config);
  const app = createInventoryApp({
    repository,
    verifier,
    logger,
    maxBodyBytes: () => inForce().server.maxBodyBytes,
    metrics,
  });

  const server = http.createServer(
    { maxHeaderSize: config.server.maxHeaderBytes + GATEWAY_HEADER_ALLOWANCE_BYTES },
    app,
  );
  // The size bounds the headers; node's count limit (1,000 when headers arrive in several reads)
  // would drop the gateway's token and Host, which come after the client's own headers.
  server.maxHeadersCount = 0;
  // Longer than any client's idle keep-alive, so the gateway never reuses a socket we are closing.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? config.inventory.port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    repository.close();
    throw err;
  }
  const { port } = server.address() as AddressInfo;
  const reachableHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  const url = `http://${reachableHost.includes(':') ? `[${reachableHost}]` : reachableHost}:${port}`;

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    // The database closes once every request in flight has finished with it.
    closing ??= closeServer(server, config.server.shutdownTimeoutMs).finally(() => repository.close());
    return closing;
  };

  return { server, port, url, metrics: metrics.registry, checkWrites: () => repository.checkWrites(), close };
}
