import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig, mergeConfig, type Config } from '../../src/shared/config';
import { createLogger } from '../../src/shared/logger';
import { tracing } from '../../src/shared/telemetry/telemetry';
import type { Clock } from '../../src/shared/clock';
import { startProduct, type RunningProduct } from '../../src/product';
import { testRedisUrl, uniqueNamespace } from './test-redis';

/** Captures log lines so tests can assert on them (and that keys never appear in them). */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _encoding: string, callback: () => void): void {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    callback();
  }
  text(): string {
    return this.lines.join('\n');
  }
}

export interface ProductHarnessOptions {
  /** Use the test Redis (default) or the in-process store. */
  redis?: boolean;
  /** A Redis of the test's own instead of the shared test Redis (to count its commands). */
  redisUrl?: string;
  /** Namespace shared by instances that must share counts; a fresh one by default. */
  namespace?: string;
  /** Config overrides merged after files and environment. */
  overrides?: Record<string, unknown>;
  /** Environment variables as the process would see them (APP_ENV, …). */
  env?: Record<string, string>;
  clock?: Clock;
  /** Random source for Retry-After jitter. */
  random?: () => number;
  dataDir?: string;
}

export interface ProductHarness extends RunningProduct {
  config: Config;
  logs: LogCapture;
  dataDir: string;
}

/**
 * Starts the whole product in this process on free loopback ports: gateway, admin and (unless
 * `upstream.url` is overridden) the inventory, on a private data dir and Redis namespace.
 */
export async function startTestProduct(options: ProductHarnessOptions = {}): Promise<ProductHarness> {
  const dataDir = options.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'asg-product-'));
  const env: Record<string, string> = {
    SIGNING_SECRET: 'test-signing-secret-that-is-long-enough-0123456789',
    ADMIN_TOKEN: 'test-admin-token-that-is-long-enough-0123456789',
    ...options.env,
  };
  if (options.redis !== false) env.REDIS_URL = options.redisUrl ?? testRedisUrl();
  const namespace = options.namespace ?? uniqueNamespace('product');
  // A reload (SIGHUP, POST /admin/reload) reads the same sources again: a test changes CONFIG_FILE's contents.
  const load = () =>
    loadConfig({
      env,
      overrides: mergeConfig(
        {
          dataDir,
          server: { host: '127.0.0.1' },
          // 2 s rather than the default 200 ms: on a loaded 2-core test machine a busy process can read
          // Redis's reply later than 200 ms, take it for an outage and limit on its fallback for a
          // moment, which would blur the exact counts these suites assert. Outage suites set 200.
          redis: { namespace, commandTimeoutMs: 2000 },
          logLevel: 'info',
        },
        (options.overrides ?? {}) as Parameters<typeof mergeConfig>[1],
      ) as never,
    });
  const config = load();
  const logs = new LogCapture();
  const logger = createLogger(config.logLevel, logs, { keyPrefix: config.keys.prefix, traceFields: tracing() });
  const product = await startProduct(config, {
    logger,
    clock: options.clock,
    random: options.random,
    gatewayPort: 0,
    adminPort: 0,
    inventoryPort: 0,
    loadConfig: load,
  });
  return { ...product, config, logs, dataDir };
}
