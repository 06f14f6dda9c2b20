import { Registry } from 'prom-client';
import {
  ConfigError,
  loadConfigOffThread,
  webhookTargetProblems,
  type Config,
  type ReloadOutcome,
} from '../shared/config';
import type { AdminListenerAddress } from '../shared/http/admin-listener-address';
import { readTlsPair, type TlsPair } from '../shared/http/tls-pair';
import { systemClock, type Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { UpstreamTokenSigner, resolveSigningSecret } from '../shared/http/upstream-token';
import { createKeyDurabilityMetrics, KeyResolver, KeyService, keysAsPlanUsers, type PlanUsers } from '../keys';
import type { RunningInventory } from '../inventory';
import {
  createGatewayMetrics,
  type GatewayMetrics,
  type GatewayMetricSources,
  type LeaseFigures,
} from '../shared/metrics/metrics';
import type { LeasingKeyLimiter } from '../limits/leases/leasing-key-limiter';
import type { TrafficRecorder, TrafficSecond } from '../admin/stats/traffic-recorder';
import type { MetricsSource } from '../admin/app';
import type { LimiterEvents } from '../limits';
import { Closers } from './closers';
import { startStores, type Stores } from './stores';
import { startEmbeddedInventory } from './inventory';
import { startRecorders } from './recorders';
import { keyDecisionListener, startNotifications } from './notifications';
import { usageReports } from './usage-reports';
import { startUsageEvents, usagePeriodMsInForce } from './usage-events';
import { startConsumers } from './consumers';
import type { ConsumerService } from '../consumers/consumer-service';
import { startForwarder, startGatewayListener } from './gateway-listener';
import type { GuardedForwarder } from '../gateway/upstream/forward-contract';
import { startAdminListener } from './admin-listener';
import { KeyRevocations } from './key-revocations';
import { startAuthzListener } from './authz-listener';
import { resolveAdminToken } from './admin-token-file';
import { ConfigState } from './reload/config-state';
import { ConfigReloader } from './reload/reloader';
import { createConfigMetrics } from './reload/config-metrics';
import { planRemovalProblems } from './reload/plan-check';
import { enforceLabelAllowlist, LabelAllowlist } from '../shared/metrics/metric-labels';
import { ROUTE_TEMPLATES } from '../gateway/operations/routes';

export { resolveAdminToken };

export interface StartOptions {
  logger: Logger;
  clock?: Clock;
  /** Uniform [0, 1) numbers for Retry-After jitter; Math.random unless a test fixes them. */
  random?: () => number;
  /** Port overrides (0 = any free port), for tests and for running several instances. */
  gatewayPort?: number;
  adminPort?: number;
  /** The decision listener's port (CONTRACT §11) when it runs: config server.authzPort (AUTHZ_PORT) unless given. */
  authzPort?: number;
  inventoryPort?: number;
  /**
   * What the admin listener's /metrics serves, given this process's registry (the embedded
   * inventory's merged in). Default: that registry; a worker serves every worker's sum instead.
   */
  metricsSource?: (registry: Registry) => MetricsSource;
  /** What GET /admin/stats sums, given this process's recorder. Default: its own; a worker asks every worker. */
  trafficSource?: (recorder: TrafficRecorder) => () => Promise<TrafficSecond[]>;
  /** How a reload reads the config again (default: loadConfig() from this process's environment, on a thread of its own). */
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
  /** The decision listener for an edge proxy (AUTHZ_PORT); null when it is off. */
  authzUrl: string | null;
  /** Set when this process runs the inventory itself. */
  inventory: RunningInventory | null;
  adminToken: string;
  keyService: KeyService;
  /** Consumers (/admin/consumers), for a bootstrap or a bench that creates them in process. */
  consumerService: ConsumerService;
  /** SIGHUP and POST /admin/reload: re-read, validate whole, apply or change nothing. */
  reload(trigger: string): Promise<ReloadOutcome>;
  /** Puts a config already validated (and the TLS pair) in force: requests that start afterwards use it. */
  applyConfig(config: Config, pair: TlsPair | null): void;
  /** The config in force, its hash and the last reload: the one holder every reader of a reloadable setting asks. */
  configState: ConfigState;
  /** Who uses a plan, asked before a reload removes one (the supervisor asks a worker's). */
  planUsers: PlanUsers[];
  close(): Promise<void>;
}

const registryAsSource = (registry: Registry): MetricsSource => ({
  contentType: registry.contentType,
  text: () => registry.metrics(),
});

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
    // Where the admin listener answers (its port once it listens): what no webhook may reach.
    let adminPort = options.adminPort || config.server.adminPort;
    const adminListener = () => ({ host: config.server.adminHost, port: adminPort });
    // A receiver whose name resolves to it stops startup too, as one the URL alone shows does at load.
    const webhookProblems = await webhookTargetProblems(config.notifications, adminListener());
    if (webhookProblems.length > 0) throw new ConfigError(webhookProblems);
    // What a reload may change is read from here by every reader, when it needs it: the gateway's
    // handler (built again for a new config), the key service, the admin API, the embedded
    // inventory and the metrics. A reload puts a new config here and nothing else.
    const configState = new ConfigState(config);
    const inForce = () => configState.config;
    const starting: Starting = { config, options, logger, clock, closers, inForce, adminListener };
    let stores: Stores | null = null;
    let forwarder: GuardedForwarder | null = null;
    const { metrics, keyDurability, labels } = createProductMetrics(inForce, {
      activeBans: () => stores!.limiters.keyLimiter.activeBans(),
      deprecations: () => inForce().deprecations,
      upstream: () => forwarder!,
      leases: () => leaseFigures(stores?.limiters.leases ?? null),
    });
    const { inventory, upstreamUrl, ...opened } = await startStoresAndInventory(starting, { metrics, keyDurability });
    stores = opened.stores;
    const keys = await startKeys(starting, stores);
    const { recorders, notifier, usageEventDatabases } = startRecording(starting, stores, metrics);
    forwarder = startForwarder(config, { upstreamUrl, metrics, logger, clock, closers });
    const keyRevocations = keyRevocationsOf(config, { keyService: keys.keyService, stores, notifier, clock, logger });
    const deciding = decidingDependencies(starting, { stores, metrics, keys, recorders, notifier, keyRevocations });
    const gateway = await startGatewayListener(config, { ...deciding, forwarder, port: options.gatewayPort }, tlsPair);
    const authzUrl = await startAuthzListener(config, { ...deciding, port: options.authzPort });
    const applyConfig = (next: Config, pair: TlsPair | null) => {
      configState.record(null, next);
      if (pair && gateway.setTlsPair) gateway.setTlsPair(pair);
    };
    const planUsers = [keysAsPlanUsers(stores.keyStore)];
    const reload =
      options.reload ?? reloadsInThisProcess(starting, { state: configState, apply: applyConfig, planUsers, metrics });
    const adminToken = resolveAdminToken(config);
    const adminUrl = await startAdministration(starting, {
      adminToken,
      configState,
      reload,
      stores,
      metrics,
      keys,
      recorders,
      inventory,
      upstreamUrl,
      forwarder,
      keyRevocations,
      usageEventDatabases,
    });
    adminPort = Number(/:(\d+)$/.exec(adminUrl)![1]);
    // The metrics registered since (the reload's) take the same closed sets.
    enforceLabelAllowlist(metrics.registry, labels);
    return {
      gatewayUrl: gateway.url,
      adminUrl,
      authzUrl,
      inventory,
      adminToken,
      keyService: keys.keyService,
      consumerService: keys.consumers.service,
      reload,
      applyConfig,
      configState,
      planUsers,
      close: () => closers.closeAll(),
    };
  } catch (err) {
    await closers.closeAll();
    throw err;
  }
}

/** The admin listener: the admin API, the console, /metrics and the health checks. */
function startAdministration(
  starting: Starting,
  parts: {
    adminToken: string;
    configState: ConfigState;
    reload: (trigger: string) => Promise<ReloadOutcome>;
    stores: Stores;
    metrics: GatewayMetrics;
    keys: Awaited<ReturnType<typeof startKeys>>;
    recorders: ReturnType<typeof startRecording>['recorders'];
    inventory: RunningInventory | null;
    upstreamUrl: string;
    forwarder: GuardedForwarder;
    keyRevocations: ReturnType<typeof keyRevocationsOf>;
    usageEventDatabases: ReturnType<typeof startRecording>['usageEventDatabases'];
  },
): Promise<string> {
  const { config, clock, logger, closers, inForce, options } = starting;
  const { adminToken, configState, reload, stores, metrics, keys, recorders } = parts;
  return startAdminListener(config, {
    ...recorders,
    adminToken,
    keyService: keys.keyService,
    consumerService: keys.consumers.service,
    stores,
    metrics,
    inventory: parts.inventory,
    upstreamUrl: parts.upstreamUrl,
    forwarder: parts.forwarder,
    metricsSource: options.metricsSource ?? registryAsSource,
    trafficSeconds: options.trafficSource
      ? options.trafficSource(recorders.traffic)
      : async () => recorders.traffic.seconds(),
    logger,
    clock,
    port: options.adminPort,
    closers,
    configAdministration: { view: () => configState.view(), reload },
    configInForce: inForce,
    ...usageReports({ stores, recorders, keyService: keys.keyService, clock }),
    keyRevocations: parts.keyRevocations,
    usageEventDatabases: parts.usageEventDatabases,
  });
}

/** What every starter of startProduct is given: the config at start and the one in force, and what the process owns. */
interface Starting {
  config: Config;
  options: StartOptions;
  logger: Logger;
  clock: Clock;
  closers: Closers;
  inForce: () => Config;
  adminListener: () => AdminListenerAddress;
}

/** The stores (keys, consumers, limiters, outboxes) and the embedded inventory unless upstream.url is set. */
async function startStoresAndInventory(
  starting: Starting,
  parts: { metrics: GatewayMetrics; keyDurability: ReturnType<typeof createProductMetrics>['keyDurability'] },
) {
  const { config, logger, clock, closers, inForce, options } = starting;
  const { metrics, keyDurability } = parts;
  const stores = await startStores(config, {
    logger,
    clock,
    closers,
    keyDurability,
    metrics,
    limiterEvents: limiterEventsFor(config, metrics, logger),
    leases: () => inForce().rateLimit.leases,
  });
  const inventory = await startEmbeddedInventory(config, {
    logger,
    clock,
    port: options.inventoryPort,
    closers,
    configInForce: inForce,
  });
  return { stores, inventory, upstreamUrl: config.upstream.url ?? inventory!.url };
}

/** Consumers, the key service and the resolver the gateway finds keys with. */
async function startKeys(starting: Starting, stores: Stores) {
  const { config, clock, logger, closers, inForce } = starting;
  const consumers = await startConsumers({
    consumerStore: stores.consumerStore,
    keyStore: stores.keyStore,
    keyLimiter: stores.limiters.keyLimiter,
    clock,
    logger,
    closers,
    costs: () => inForce().costs,
  });
  const keyService = new KeyService({
    store: stores.keyStore,
    prefix: config.keys.prefix,
    plans: () => inForce().plans,
    clock,
    costs: () => inForce().costs,
    ...consumers.keyServiceHooks,
  });
  const resolver = await startKeyResolver(config, stores.keyStore, { clock, logger, closers });
  return { consumers, keyService, resolver };
}

/** What is recorded off the request path: the usage recorders, the webhooks and the usage events. */
function startRecording(starting: Starting, stores: Stores, metrics: GatewayMetrics) {
  const { config, clock, logger, closers, inForce, adminListener } = starting;
  const recorders = startRecorders({
    stores,
    metrics,
    logger,
    clock,
    closers,
    usagePeriodMs: usagePeriodMsInForce(inForce),
  });
  const sinks = { stores, configInForce: inForce, registry: metrics.registry, clock, logger, closers, adminListener };
  const notifier = startNotifications(config, sinks);
  const usageEvents = startUsageEvents(config, sinks);
  return { recorders, notifier, usageEventDatabases: usageEvents.writableDatabases };
}

/** What the gateway listener and the decision listener both decide requests with. */
function decidingDependencies(
  starting: Starting,
  parts: {
    stores: Stores;
    metrics: GatewayMetrics;
    keys: Awaited<ReturnType<typeof startKeys>>;
    recorders: ReturnType<typeof startRecording>['recorders'];
    notifier: ReturnType<typeof startRecording>['notifier'];
    keyRevocations: ReturnType<typeof keyRevocationsOf>;
  },
) {
  const { config, clock, logger, closers, inForce, options } = starting;
  const { stores, metrics, keys, recorders, notifier, keyRevocations } = parts;
  const signer = new UpstreamTokenSigner(
    { ...config.signing, secret: resolveSigningSecret(config.signing.secret, config.dataDir) },
    clock,
  );
  return {
    ...recorders,
    keyDecisions: keyDecisionListener(recorders.keyActivity, notifier),
    keyRevocation: keyRevocations,
    consumers: keys.consumers.lookup,
    consumerAccessPolicy: keys.consumers.accessPolicy,
    keyResolver: keys.resolver,
    limiters: stores.limiters,
    signer,
    metrics,
    logger,
    clock,
    random: options.random,
    closers,
    configInForce: inForce,
  };
}

/** The key resolver of the request path, once its filter of issued keys is built (until then every unknown key would be looked up in Redis). */
async function startKeyResolver(
  config: Config,
  keyStore: Stores['keyStore'],
  deps: { clock: Clock; logger: Logger; closers: Closers },
): Promise<KeyResolver> {
  const resolver = new KeyResolver(keyStore, deps.clock, {
    prefix: config.keys.prefix,
    cacheTtlSeconds: config.keys.cacheTtlSeconds,
    negativeCacheTtlSeconds: config.keys.negativeCacheTtlSeconds,
    issued: {
      onRebuilt: (hashes, bytes, ms) =>
        deps.logger.info({ hashes, bytes, ms: Math.round(ms) }, 'issued-key filter built'),
    },
  });
  deps.closers.add(() => resolver.close());
  await resolver.ready();
  return resolver;
}

/** Revocations by a key's holder and by secret scanning: the key service's revoke, audited and announced. */
function keyRevocationsOf(
  config: Config,
  deps: {
    keyService: KeyService;
    stores: Stores;
    notifier: ReturnType<typeof startNotifications>;
    clock: Clock;
    logger: Logger;
  },
): KeyRevocations {
  const { keyService, stores, notifier } = deps;
  return new KeyRevocations({
    prefix: config.keys.prefix,
    revoke: (id) => keyService.revoke(id),
    findByHash: (hash) => stores.keyStore.findByHash(hash),
    auditLog: stores.auditLog,
    announce: (record, by) => notifier.keyRevoked(record, by),
    clock: deps.clock,
    logger: deps.logger.child({ component: 'admin' }),
  });
}

/**
 * The label values the config in force adds to the fixed sets: its plans, and the routes (every
 * deprecation names an operation of the table, so its route is one of these: operationIssues).
 */
function labelSetsOf(config: Config): Record<string, string[]> {
  return { plan: Object.keys(config.plans), route: [...ROUTE_TEMPLATES] };
}

/**
 * The gateway's metrics with the key store's, every label held to its closed set (CONTRACT §6):
 * nothing a client sends makes a series; plans and routes as the config in force names them (the
 * allowlist asks `inForce`, so a reload reaches it as it reaches every other reader).
 */
/** gateway_lease_units_total and gateway_lease_admissions_total from the leasing limiter (null: none). */
function leaseFigures(leases: LeasingKeyLimiter | null): LeaseFigures | null {
  return leases && { units: leases.book.counts.snapshot(), admissions: leases.admissions };
}

function createProductMetrics(inForce: () => Config, sources: GatewayMetricSources) {
  const metrics = createGatewayMetrics(new Registry(), sources);
  const keyDurability = createKeyDurabilityMetrics();
  keyDurability.register(metrics.registry);
  const labels = LabelAllowlist.following(inForce, labelSetsOf);
  enforceLabelAllowlist(metrics.registry, labels);
  return { metrics, keyDurability, labels };
}

/** SIGHUP and POST /admin/reload handled in this process: read, validate, refuse removing a plan in use, apply. */
function reloadsInThisProcess(
  starting: Starting,
  deps: {
    state: ConfigState;
    apply: (config: Config, pair: TlsPair | null) => void;
    planUsers: PlanUsers[];
    metrics: GatewayMetrics;
  },
): (trigger: string) => Promise<ReloadOutcome> {
  const load = starting.options.loadConfig;
  const reloader = new ConfigReloader({
    state: deps.state,
    // Off the event loop: parsing up to 1 MiB of YAML takes seconds, which the listeners must not wait for.
    load: load ?? (() => loadConfigOffThread()),
    apply: deps.apply,
    vet: (current, next) => planRemovalProblems(current, next, deps.planUsers),
    metrics: createConfigMetrics(deps.metrics.registry),
    logger: starting.logger,
    adminListener: starting.adminListener,
  });
  return (trigger) => reloader.reload(trigger);
}

/** The limiters' store events as metrics and log lines. */
function limiterEventsFor(config: Config, metrics: GatewayMetrics, logger: Logger): Partial<LimiterEvents> {
  const failMode = config.store.failMode;
  return {
    storeError: () => metrics.storeErrors.inc(),
    degraded: (err) => {
      metrics.storeDegraded.set(1);
      const message =
        failMode === 'open'
          ? 'store unreachable: serving without limits until it answers'
          : 'store unreachable: limiting per instance until it answers';
      logger.error({ err: (err as Error).message, failMode }, message);
    },
    recovered: () => {
      metrics.storeDegraded.set(0);
      logger.info('store answers again: limits are global again');
    },
  };
}
