import { Registry } from 'prom-client';
import { loadConfig, type Config, type ReloadOutcome } from '../shared/config';
import { readTlsPair, type TlsPair } from '../shared/tls-pair';
import { systemClock, type Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { UpstreamTokenSigner, resolveSigningSecret } from '../shared/upstream-token';
import { createKeyDurabilityMetrics, KeyResolver, KeyService } from '../keys';
import type { RunningInventory } from '../inventory';
import { createGatewayMetrics, type GatewayMetrics } from '../shared/metrics';
import type { TrafficRecorder, TrafficSecond } from '../admin/stats/traffic-recorder';
import type { MetricsSource } from '../admin/app';
import type { LimiterEvents } from '../limits';
import { Closers } from './closers';
import { startStores, type Stores } from './stores';
import { startEmbeddedInventory } from './inventory';
import { startRecorders } from './recorders';
import { startForwarder, startGatewayListener } from './gateway-listener';
import type { GuardedForwarder } from '../gateway/upstream/forward-contract';
import { startAdminListener } from './admin-listener';
import { resolveAdminToken } from './admin-token';
import { ConfigState } from './reload/config-state';
import { ConfigReloader } from './reload/reloader';
import { createConfigMetrics } from './reload/config-metrics';

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
  /** How a reload reads the config again (default: loadConfig() from this process's environment). */
  loadConfig?: () => Config;
  /**
   * Who reloads. Default: this process (SIGHUP and POST /admin/reload, its own config metrics).
   * A worker passes the supervisor's, which reads and validates once and applies on every worker.
   */
  reload?: (trigger: string) => Promise<ReloadOutcome>;
}

export interface RunningProduct {
  gatewayUrl: string;
  adminUrl: string;
  /** Set when this process runs the inventory itself. */
  inventory: RunningInventory | null;
  adminToken: string;
  keyService: KeyService;
  /** SIGHUP and POST /admin/reload: re-read, validate whole, apply or change nothing. */
  reload(trigger: string): Promise<ReloadOutcome>;
  /** Puts a config already validated (and the TLS pair) in force: requests that start afterwards use it. */
  applyConfig(config: Config, pair: TlsPair | null): void;
  /** The config in force, its hash and the last reload: the one holder every reader of a reloadable setting asks. */
  configState: ConfigState;
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
    // A missing, unreadable or mismatched pair stops startup before anything is opened.
    const tlsPair = await readTlsPair(config.tls);
    // What a reload may change is read from here by every reader, when it needs it: the gateway's
    // handler (built again for a new config), the key service, the admin API, the embedded
    // inventory and the metrics. A reload puts a new config here and nothing else.
    const configState = new ConfigState(config);
    const inForce = () => configState.config;
    let stores: Stores | null = null;
    let forwarder: GuardedForwarder | null = null;
    const metrics = createGatewayMetrics(new Registry(), {
      activeBans: () => stores!.limiters.keyLimiter.activeBans(),
      deprecations: () => inForce().deprecations,
      upstream: () => forwarder!,
    });
    const keyDurability = createKeyDurabilityMetrics();
    keyDurability.register(metrics.registry);
    stores = await startStores(config, { logger, clock, closers, keyDurability, metrics, limiterEvents: limiterEventsFor(config, metrics, logger) });
    const inventory = await startEmbeddedInventory(config, { logger, clock, port: options.inventoryPort, closers, configInForce: inForce });
    const upstreamUrl = config.upstream.url ?? inventory!.url;

    const keyService = new KeyService({ store: stores.keyStore, prefix: config.keys.prefix, plans: () => inForce().plans, clock, costs: config.costs });
    const resolver = new KeyResolver(stores.keyStore, clock, {
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
    const gateway = await startGatewayListener(config, { ...recorders, keyResolver: resolver, limiters: stores.limiters, signer, forwarder, metrics, logger, clock, random: options.random, port: options.gatewayPort, closers, configInForce: inForce }, tlsPair);
    const applyConfig = (next: Config, pair: TlsPair | null) => {
      configState.record(null, next);
      if (pair && gateway.setTlsPair) gateway.setTlsPair(pair);
    };
    const reload =
      options.reload ??
      reloaderFor(new ConfigReloader({ state: configState, load: options.loadConfig ?? (() => loadConfig()), apply: applyConfig, metrics: createConfigMetrics(metrics.registry), logger }));
    const adminToken = resolveAdminToken(config);
    const adminUrl = await startAdminListener(config, {
      ...recorders,
      adminToken,
      keyService,
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
      configAdministration: { view: () => configState.view(), reload },
      configInForce: inForce,
    });
    return { gatewayUrl: gateway.url, adminUrl, inventory, adminToken, keyService, reload, applyConfig, configState, close: () => closers.closeAll() };
  } catch (err) {
    await closers.closeAll();
    throw err;
  }
}

const reloaderFor = (reloader: ConfigReloader) => (trigger: string) => reloader.reload(trigger);

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
