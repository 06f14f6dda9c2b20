import { Registry } from 'prom-client';
import { loadConfig, type Config, type ReloadOutcome } from '../shared/config';
import { readTlsPair, type TlsPair } from '../shared/tls-pair';
import { systemClock, type Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { UpstreamTokenSigner, resolveSigningSecret } from '../shared/upstream-token';
import { createKeyDurabilityMetrics, KeyResolver, KeyService } from '../keys';
import type { RunningInventory } from '../inventory';
import { createGatewayMetrics, setDeprecationSunsets, type GatewayMetrics } from '../shared/metrics';
import type { TrafficRecorder, TrafficSecond } from '../admin/stats/traffic-recorder';
import type { MetricsSource } from '../admin/app';
import type { LimiterEvents } from '../limits';
import { Closers } from './closers';
import { startStores, type Stores } from './stores';
import { startEmbeddedInventory } from './inventory';
import { startRecorders } from './recorders';
import { keyDecisionListener, startNotifications } from './notifications';
import { usageReports } from './usage-reports';
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
  keys: KeyService;
  /** SIGHUP and POST /admin/reload: re-read, validate whole, apply or change nothing. */
  reload(trigger: string): Promise<ReloadOutcome>;
  /** Puts a config already validated (and the TLS pair) in force: requests that start afterwards use it. */
  applyConfig(config: Config, pair: TlsPair | null): void;
  /** The config in force, its hash and the last reload. */
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

    const livePlans = { ...config.plans };
    const keys = new KeyService({ store: stores.keys, prefix: config.keys.prefix, plans: livePlans, clock, costs: config.costs });
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
    const notifier = startNotifications(config, { stores, registry: metrics.registry, clock, logger, closers });
    const signer = new UpstreamTokenSigner({ ...config.signing, secret: resolveSigningSecret(config.signing.secret, config.dataDir) }, clock);

    forwarder = startForwarder(config, { upstreamUrl, metrics, logger, clock, closers });
    const keyDecisions = keyDecisionListener(recorders.keyActivity, notifier);
    const gateway = await startGatewayListener(config, { ...recorders, keyDecisions, keys: resolver, limiters: stores.limiters, signer, forwarder, metrics, logger, clock, random: options.random, port: options.gatewayPort, closers }, tlsPair);
    const configState = new ConfigState(config);
    const applyConfig = (next: Config, pair: TlsPair | null) => {
      gateway.applyConfig(next);
      if (pair && gateway.setTlsPair) gateway.setTlsPair(pair);
      // The admin API and the key service read the plans object they were given: updated in place.
      replaceContents(livePlans, next.plans);
      setDeprecationSunsets(metrics.deprecationSunset, next.deprecations);
      notifier.applyConfig(next.notifications);
    };
    const reload =
      options.reload ??
      reloaderFor(new ConfigReloader({ state: configState, load: options.loadConfig ?? (() => loadConfig()), apply: applyConfig, metrics: createConfigMetrics(metrics.registry), logger }));
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
      plans: livePlans,
      configAdministration: { view: () => configState.view(), reload },
      inForce: () => configState.config,
      ...usageReports({ stores, recorders, keys, clock }),
    });
    return { gatewayUrl: gateway.url, adminUrl, inventory, adminToken, keys, reload, applyConfig, configState, close: () => closers.closeAll() };
  } catch (err) {
    await closers.closeAll();
    throw err;
  }
}

const reloaderFor = (reloader: ConfigReloader) => (trigger: string) => reloader.reload(trigger);

function replaceContents<T extends object>(target: T, source: T): void {
  for (const key of Object.keys(target)) delete (target as Record<string, unknown>)[key];
  Object.assign(target, source);
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
