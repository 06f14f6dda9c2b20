import { Registry } from 'prom-client';
import type { Config } from '../shared/config';
import { systemClock, type Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { UpstreamTokenSigner, resolveSigningSecret } from '../shared/upstream-token';
import { createKeyDurabilityMetrics, KeyResolver, KeyService } from '../keys';
import type { RunningInventory } from '../inventory';
import { createGatewayMetrics, type GatewayMetrics } from '../gateway/metrics';
import type { TrafficRecorder, TrafficSecond } from '../admin/stats/traffic-recorder';
import type { MetricsSource } from '../admin/app';
import type { LimiterEvents } from '../limits';
import { Closers } from './closers';
import { startStores, type Stores } from './stores';
import { startEmbeddedInventory } from './inventory';
import { startRecorders } from './recorders';
import { startForwarder, startGatewayListener } from './gateway-listener';
import type { GuardedForwarder } from '../gateway/forwarder';
import { startAdminListener } from './admin-listener';
import { resolveAdminToken } from './admin-token';

export { resolveAdminToken };

export interface StartOptions {
  logger: Logger;
  clock?: Clock;
  /** Uniform [0, 1) numbers for Retry-After jitter; Math.random unless a test fixes them. */
  random?: () => number;
  /** Port overrides (0 = any free port), for tests and for running several instances. */
  gatewayPort?: number;
  adminPort?: number;
  inventoryPort?: number;
  /**
   * What the admin listener's /metrics serves, given this process's registry (the embedded
   * inventory's merged in). Default: that registry; a worker serves every worker's sum instead.
   */
  metricsSource?: (registry: Registry) => MetricsSource;
  /** What GET /admin/stats sums, given this process's recorder. Default: its own; a worker asks every worker. */
  trafficSource?: (recorder: TrafficRecorder) => () => Promise<TrafficSecond[]>;
}

export interface RunningProduct {
  gatewayUrl: string;
  adminUrl: string;
  /** Set when this process runs the inventory itself. */
  inventory: RunningInventory | null;
  adminToken: string;
  keys: KeyService;
  close(): Promise<void>;
}

const registryAsSource = (registry: Registry): MetricsSource => ({ contentType: registry.contentType, text: () => registry.metrics() });

/**
 * Starts everything this process runs, starter by starter: the stores, the inventory (unless
 * upstream.url is set), the recorders, the gateway listener and the admin listener. Each starter
 * registers what it opened; a failed start closes all of it in reverse order, as a stop does.
 */
export async function startProduct(config: Config, options: StartOptions): Promise<RunningProduct> {
  const { logger } = options;
  const clock = options.clock ?? systemClock;
  const closers = new Closers();
  try {
    let stores: Stores | null = null;
    let forwarder: GuardedForwarder | null = null;
    const metrics = createGatewayMetrics(new Registry(), {
      activeBans: () => stores!.limiters.keys.activeBans(),
      deprecations: config.deprecations,
      upstream: () => forwarder!,
    });
    const keyDurability = createKeyDurabilityMetrics();
    keyDurability.register(metrics.registry);
    stores = await startStores(config, { logger, clock, closers, keyDurability, metrics, limiterEvents: limiterEventsFor(config, metrics, logger) });
    const inventory = await startEmbeddedInventory(config, { logger, clock, port: options.inventoryPort, closers });
    const upstreamUrl = config.upstream.url ?? inventory!.url;

    const keys = new KeyService({ store: stores.keys, prefix: config.keys.prefix, plans: config.plans, clock, costs: config.costs });
    const resolver = new KeyResolver(stores.keys, clock, {
      prefix: config.keys.prefix,
      cacheTtlSeconds: config.keys.cacheTtlSeconds,
      negativeCacheTtlSeconds: config.keys.negativeCacheTtlSeconds,
      issued: { onRebuilt: (hashes, bytes, ms) => logger.info({ hashes, bytes, ms: Math.round(ms) }, 'issued-key filter built') },
    });
    closers.add(() => resolver.close());
    // Until the filter of issued keys is built every unknown key is looked up in Redis, as before; wait for it.
    await resolver.ready();
    const recorders = startRecorders({ stores, metrics, logger, clock, closers });
    const signer = new UpstreamTokenSigner({ ...config.signing, secret: resolveSigningSecret(config.signing.secret, config.dataDir) }, clock);

    forwarder = startForwarder(config, { upstreamUrl, metrics, logger, clock, closers });
    const gatewayUrl = await startGatewayListener(config, { ...recorders, keys: resolver, limiters: stores.limiters, signer, forwarder, metrics, logger, clock, random: options.random, port: options.gatewayPort, closers });
    const adminToken = resolveAdminToken(config);
    const adminUrl = await startAdminListener(config, {
      ...recorders,
      adminToken,
      keys,
      stores,
      metrics,
      inventory,
      upstreamUrl,
      forwarder,
      metricsSource: options.metricsSource ?? registryAsSource,
      trafficSeconds: options.trafficSource ? options.trafficSource(recorders.traffic) : async () => recorders.traffic.seconds(),
      logger,
      clock,
      port: options.adminPort,
      closers,
    });
    return { gatewayUrl, adminUrl, inventory, adminToken, keys, close: () => closers.closeAll() };
  } catch (err) {
    await closers.closeAll();
    throw err;
  }
}

/** The limiters' store events as metrics and log lines. */
function limiterEventsFor(config: Config, metrics: GatewayMetrics, logger: Logger): Partial<LimiterEvents> {
  const failMode = config.store.failMode;
  return {
    storeError: () => metrics.storeErrors.inc(),
    degraded: (err) => {
      metrics.storeDegraded.set(1);
      const message = failMode === 'open' ? 'store unreachable: serving without limits until it answers' : 'store unreachable: limiting per instance until it answers';
      logger.error({ err: (err as Error).message, failMode }, message);
    },
    recovered: () => {
      metrics.storeDegraded.set(0);
      logger.info('store answers again: limits are global again');
    },
  };
}
