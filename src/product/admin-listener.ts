import { Registry } from 'prom-client';
import type { Config } from '../shared/config';
import type { Clock } from '../shared/clock';
import { closeServer } from '../shared/http/close-server';
import { createBoundedServer } from '../shared/http/http-server';
import type { Logger } from '../shared/logger';
import type { KeyService } from '../keys';
import type { ConsumerService } from '../consumers/consumer-service';
import { withConsumersInBackup } from '../consumers/consumer-backup';
import type { KeyActivity } from '../usage/key-activity';
import type { GatewayMetrics } from '../shared/metrics/metrics';
import { answerUnparsableRequest } from '../shared/http/unparsable-request';
import { buildDeprecationReport } from '../admin/deprecation-report';
import type { DeprecationUsage } from '../usage/deprecation-usage';
import type { TrafficSecond } from '../admin/stats/traffic-recorder';
import { writeReplicationReport } from '../admin/write-replication-report';
import { createAdminApp, type MetricsSource, type ReadinessCheck } from '../admin/app';
import type { RunningInventory } from '../inventory';
import type { GuardedForwarder } from '../gateway/upstream/forward-contract';
import type { Stores, WritableDatabase } from './stores';
import type { Closers } from './closers';
import type { ConfigAdministration } from '../admin/config-routes';
import { listen, localUrl } from './listen';
import type { UsageExport } from '../admin/usage-export-routes';
import type { TopKeysDependencies } from '../admin/stats/top-keys-route';
import { verifyingKeysOf } from '../shared/config/secret-scanning';
import type { KeyRevocations } from './key-revocations';

export interface AdminListenerDependencies {
  adminToken: string;
  keyService: KeyService;
  /** /admin/consumers, and the check of a backup's consumer lines. */
  consumerService: ConsumerService;
  stores: Stores;
  keyActivity: KeyActivity;
  deprecationUsage: DeprecationUsage;
  metrics: GatewayMetrics;
  /** The embedded inventory, whose metrics are served beside the gateway's; null when it runs elsewhere. */
  inventory: RunningInventory | null;
  upstreamUrl: string;
  /** Its circuit breaker's state is reported on /readyz. */
  forwarder: GuardedForwarder;
  metricsSource(registry: Registry): MetricsSource;
  trafficSeconds(): Promise<TrafficSecond[]>;
  logger: Logger;
  clock: Clock;
  port?: number;
  closers: Closers;
  /** GET /admin/config and POST /admin/reload. */
  configAdministration: ConfigAdministration;
  /** The config in force now (a reload replaces it): the plans, the body limit and the deprecations the admin API reads. */
  configInForce(): Config;
  /** GET /admin/usage/export. */
  usageExport: UsageExport;
  /** GET /admin/stats/top-keys. */
  topKeys: TopKeysDependencies;
  /** Revocations besides the admin API's own: POST /admin/secret-scanning's, and the webhook of DELETE /admin/keys/{id}. */
  keyRevocations?: KeyRevocations;
  /** The usage events' SQLite files, once open (none on Redis or with usage events off). */
  usageEventDatabases?: () => WritableDatabase[];
}

/** The admin listener: key routes, audit, usage, deprecations, stats, metrics, health, the console. Resolves its URL. */
export async function startAdminListener(config: Config, deps: AdminListenerDependencies): Promise<string> {
  const { metrics, keyService, stores, upstreamUrl } = deps;
  const logger = deps.logger.child({ component: 'admin' });
  const probes = (databases: readonly WritableDatabase[]): ReadinessCheck[] =>
    databases.map(({ name, checkWrites }) => ({ name, check: async () => checkWrites() }));
  const store: ReadinessCheck = { name: 'store', check: () => stores.ping(), scope: 'shared' };
  // A probe write to each SQLite file: a full disk, a read-only file system or a held lock shows
  // here (with its SQLite code), and passes again by itself once the cause is gone.
  const databases: ReadinessCheck[] = [
    ...probes(stores.writableDatabases),
    ...(deps.inventory ? [{ name: 'inventory database', check: async () => deps.inventory!.checkWrites() }] : []),
  ];
  const upstream: ReadinessCheck = {
    name: 'upstream',
    scope: 'shared',
    check: async () => {
      const res = await fetch(new URL('/healthz', upstreamUrl), { signal: AbortSignal.timeout(1000) });
      if (!res.ok) throw new Error(`upstream answered ${res.status}`);
    },
  };
  // Made at each request: the usage events' files open after the start (a reload may turn them on).
  // The store and the upstream are shared by every instance: shown on /readyz, never a 503 (CONTRACT §5).
  const readiness = (): ReadinessCheck[] => [
    store,
    ...databases,
    ...probes(deps.usageEventDatabases?.() ?? []),
    upstream,
  ];
  const app = createAdminApp({
    adminToken: deps.adminToken,
    failedTokensPerMinute: config.admin.failedTokensPerMinute,
    failedTokensPerMinuteTotal: config.admin.failedTokensPerMinuteTotal,
    onFailedToken: (reason) => metrics.adminAuthFailures.inc({ reason }),
    clock: deps.clock,
    keyService,
    consumerService: deps.consumerService,
    // Consumer lines checked as POST /admin/consumers checks a consumer (CONTRACT §4).
    keyBackup: withConsumersInBackup(keyService, stores.consumerStore, (fields) =>
      deps.consumerService.fromBackup(fields),
    ),
    keyLimiter: stores.limiters.keyLimiter,
    keyActivity: deps.keyActivity,
    auditLog: stores.auditLog,
    metrics: deps.metricsSource(
      deps.inventory ? Registry.merge([metrics.registry, deps.inventory.metrics]) : metrics.registry,
    ),
    readiness,
    // The breaker's state is reported, not a check: like the inventory, every instance shares it.
    readinessDetails: () => ({ upstreamCircuit: deps.forwarder.circuitState() }),
    shuttingDown: () => deps.closers.closing,
    deprecations: () =>
      buildDeprecationReport({
        deprecations: deps.configInForce().deprecations,
        callers: (operationId) => deps.deprecationUsage.callers(operationId),
        keyById: (id) => keyService.get(id),
      }),
    plans: () => deps.configInForce().plans,
    config: deps.configAdministration,
    trafficSeconds: deps.trafficSeconds,
    logger,
    maxBodyBytes: () => deps.configInForce().server.maxBodyBytes,
    ...(stores.writeReplication
      ? { confirmWrite: writeReplicationReport(() => stores.writeReplication!.confirm()) }
      : {}),
    usageExport: deps.usageExport,
    topKeys: deps.topKeys,
    ...(deps.keyRevocations ? secretScanningOf(deps.keyRevocations, deps.configInForce, logger) : {}),
  });
  const server = createBoundedServer(config.server, app);
  server.on('clientError', answerUnparsableRequest({ logger }));
  const port = await listen(server, deps.port ?? config.server.adminPort, config.server.adminHost);
  deps.closers.add(() => closeServer(server, config.server.shutdownTimeoutMs));
  return localUrl(config.server.adminHost, port);
}

/** POST /admin/secret-scanning with the public keys of the config in force, and the admin revocation's webhook. */
function secretScanningOf(revocations: KeyRevocations, configInForce: () => Config, logger: Logger) {
  return {
    secretScanning: {
      revocation: revocations,
      verifyingKeys: () => verifyingKeysOf(configInForce().secretScanning),
      logger,
    },
    onKeyRevoked: (record: Parameters<KeyRevocations['revokedByAdmin']>[0]) => revocations.revokedByAdmin(record),
  };
}
