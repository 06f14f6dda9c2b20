import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Registry } from 'prom-client';
import type { Config } from './shared/config';
import { systemClock, type Clock } from './shared/clock';
import { closeServer } from './shared/close-server';
import { createBoundedServer } from './shared/http-server';
import type { Logger } from './shared/logger';
import { connectRedis, redisConfigured, type RedisClient } from './shared/redis';
import { UpstreamTokenSigner, resolveSigningSecret } from './shared/upstream-token';
import { createKeyStore, KeyResolver, KeyService } from './keys';
import { createLimiters } from './limits';
import { startInventory, type RunningInventory } from './inventory';
import { createGatewayHandler } from './gateway/handler';
import { createHttpProxyForwarder, type Forwarder, type ForwarderSettings } from './gateway/forwarder';
import { createUndiciForwarder } from './gateway/undici-forwarder';
import { createGatewayMetrics } from './gateway/metrics';
import { answerUnparsableRequest } from './gateway/unparsable-request';
import { markCutOff } from './gateway/cut-off';
import { DeprecationUsageRecorder, MemoryDeprecationUsageStore, RedisDeprecationUsageStore } from './gateway/deprecation-usage';
import { buildDeprecationReport } from './gateway/deprecation-report';
import { TrafficRecorder, type TrafficSecond } from './admin/stats/traffic-recorder';
import { createAdminApp, type MetricsSource, type ReadinessCheck } from './admin/app';
import { RedisAuditLog, SqliteAuditLog, type AuditLog } from './admin/audit-log';
import { KeyActivityRecorder, RedisKeyActivityStore, SqliteKeyActivityStore, type KeyActivityStore } from './keys/key-activity';

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

async function listen(server: http.Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

/** In development the admin token is generated once and kept under dataDir, like the signing secret. */
export function resolveAdminToken(config: Config): string {
  if (config.admin.token) return config.admin.token;
  const file = path.join(config.dataDir, 'admin-token');
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    fs.mkdirSync(config.dataDir, { recursive: true });
    const token = randomBytes(32).toString('base64url');
    fs.writeFileSync(file, token + '\n', { mode: 0o600 });
    return token;
  }
}

function localUrl(host: string, port: number): string {
  const reachable = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `http://${reachable}:${port}`;
}

function createForwarder(kind: Config['upstream']['forwarder'], settings: ForwarderSettings): Forwarder {
  return kind === 'undici' ? createUndiciForwarder(settings) : createHttpProxyForwarder(settings);
}

/** Starts everything this process runs: the inventory (unless upstream.url is set), the gateway and the admin listener. */
export async function startProduct(config: Config, options: StartOptions): Promise<RunningProduct> {
  const { logger } = options;
  const clock = options.clock ?? systemClock;
  const metricsSourceOf = options.metricsSource ?? ((registry: Registry) => ({ contentType: registry.contentType, text: () => registry.metrics() }));
  const cleanups: Array<() => Promise<void> | void> = [];
  const closeAll = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  };

  try {
    let redis: RedisClient | null = null;
    if (redisConfigured(config.redis)) {
      redis = await connectRedis(config.redis);
      redis.on('error', (err: Error) => logger.warn({ err: err.message }, 'redis connection error'));
      const client = redis;
      cleanups.push(() => void client.disconnect());
    } else {
      logger.warn('REDIS_URL is not set: using the in-process store. Limits, bans and keys are local to this one instance; do not run several.');
    }

    let inventory: RunningInventory | null = null;
    if (!config.upstream.url) {
      // Embedded, only this process talks to it: loopback is enough and keeps it off the network.
      inventory = await startInventory(config, {
        logger: logger.child({ component: 'inventory' }),
        clock,
        port: options.inventoryPort,
        host: '127.0.0.1',
      });
      const running = inventory;
      cleanups.push(() => running.close());
    }
    const upstreamUrl = config.upstream.url ?? inventory!.url;

    const store = await createKeyStore({ redis, namespace: config.redis.namespace, dataDir: config.dataDir });
    cleanups.push(() => store.close());
    const keys = new KeyService({ store, prefix: config.keys.prefix, plans: config.plans, clock });
    const resolver = new KeyResolver(store, clock, {
      prefix: config.keys.prefix,
      cacheTtlSeconds: config.keys.cacheTtlSeconds,
      negativeCacheTtlSeconds: config.keys.negativeCacheTtlSeconds,
      issued: { onRebuilt: (hashes, bytes, ms) => logger.info({ hashes, bytes, ms: Math.round(ms) }, 'issued-key filter built') },
    });
    cleanups.push(() => resolver.close());
    // Until the filter is built every unknown key is looked up in Redis, as before; wait for it.
    await resolver.ready();
    const metrics = createGatewayMetrics(new Registry(), {
      activeBans: () => limiters.keys.activeBans(),
      deprecations: config.deprecations,
    });
    const limiters = createLimiters({
      redis,
      namespace: config.redis.namespace,
      ban: config.ban,
      minuteWindow: config.rateLimit.minuteWindow,
      anonymousPerMinute: config.anonymous.perMinute,
      clock,
      failMode: config.store.failMode,
      events: {
        storeError: () => metrics.storeErrors.inc(),
        degraded: (err) => {
          metrics.storeDegraded.set(1);
          logger.error(
            { err: (err as Error).message, failMode: config.store.failMode },
            config.store.failMode === 'open' ? 'store unreachable: serving without limits until it answers' : 'store unreachable: limiting per instance until it answers',
          );
        },
        recovered: () => {
          metrics.storeDegraded.set(0);
          logger.info('store answers again: limits are global again');
        },
      },
    });
    cleanups.push(() => limiters.close());

    const deprecationUsage = new DeprecationUsageRecorder(
      redis ? new RedisDeprecationUsageStore(redis, config.redis.namespace) : new MemoryDeprecationUsageStore(),
      clock,
      undefined,
      (err) => logger.warn({ err: (err as Error).message }, 'could not record callers of deprecated operations'),
    );
    cleanups.push(() => deprecationUsage.close());

    // Usage history and the audit trail: in Redis for every instance, else in SQLite under dataDir
    // beside the keys, so a restart keeps them as it keeps the keys.
    let keyActivityStore: KeyActivityStore;
    let auditLog: AuditLog;
    if (redis) {
      keyActivityStore = new RedisKeyActivityStore(redis, config.redis.namespace);
      auditLog = new RedisAuditLog(redis, config.redis.namespace);
    } else {
      const sqliteActivity = new SqliteKeyActivityStore(config.dataDir);
      cleanups.push(() => sqliteActivity.close());
      keyActivityStore = sqliteActivity;
      const sqliteAudit = new SqliteAuditLog(config.dataDir);
      cleanups.push(() => sqliteAudit.close());
      auditLog = sqliteAudit;
    }
    const keyActivity = new KeyActivityRecorder(keyActivityStore, clock, undefined, (err) =>
      logger.warn({ err: (err as Error).message }, 'could not record key usage'),
    );
    cleanups.push(() => keyActivity.close());

    const secret = resolveSigningSecret(config.signing.secret, config.dataDir);
    const signer = new UpstreamTokenSigner({ ...config.signing, secret }, clock);
    const forwarder = createForwarder(config.upstream.forwarder, {
      target: upstreamUrl,
      timeoutMs: config.upstream.timeoutMs,
      maxSockets: config.upstream.maxSockets,
    });
    cleanups.push(() => forwarder.close());

    const handleGatewayRequest = createGatewayHandler({
      config,
      keys: resolver,
      keyLimiter: limiters.keys,
      addressLimiter: limiters.addresses,
      signer,
      forwarder,
      metrics,
      logger,
      clock,
      random: options.random,
      deprecationUsage,
      keyActivity,
    });
    const gatewayServer = createBoundedServer(config.server, handleGatewayRequest);
    gatewayServer.on('clientError', answerUnparsableRequest({ metrics, logger, cutOff: markCutOff }));
    const gatewayPort = await listen(gatewayServer, options.gatewayPort ?? config.server.port, config.server.host);
    cleanups.push(() => closeServer(gatewayServer, config.server.shutdownTimeoutMs));

    // The console's overview: the gateway's counters sampled once a second, off the request path.
    const traffic = new TrafficRecorder(metrics, clock);
    traffic.start();
    cleanups.push(() => traffic.stop());

    const readiness: ReadinessCheck[] = [
      {
        name: 'store',
        check: async () => {
          if (redis) await redis.ping();
        },
      },
      {
        name: 'upstream',
        check: async () => {
          const res = await fetch(new URL('/healthz', upstreamUrl), { signal: AbortSignal.timeout(1000) });
          if (!res.ok) throw new Error(`upstream answered ${res.status}`);
        },
      },
    ];
    const adminToken = resolveAdminToken(config);
    const adminApp = createAdminApp({
      adminToken,
      failedTokensPerMinute: config.admin.failedTokensPerMinute,
      onFailedToken: (reason) => metrics.adminAuthFailures.inc({ reason }),
      clock,
      keys,
      keyLimiter: limiters.keys,
      keyActivity,
      auditLog,
      metrics: metricsSourceOf(
        // The embedded inventory's metrics (inventory_*) are served beside the gateway's.
        inventory ? Registry.merge([metrics.registry, inventory.metrics]) : metrics.registry,
      ),
      readiness,
      deprecations: () =>
        buildDeprecationReport({
          deprecations: config.deprecations,
          callers: (routeId) => deprecationUsage.callers(routeId),
          keyById: (id) => keys.get(id),
        }),
      trafficSeconds: options.trafficSource ? options.trafficSource(traffic) : async () => traffic.seconds(),
      logger: logger.child({ component: 'admin' }),
      maxBodyBytes: config.server.maxBodyBytes,
    });
    const adminServer = createBoundedServer(config.server, adminApp);
    adminServer.on('clientError', answerUnparsableRequest({ logger: logger.child({ component: 'admin' }) }));
    const adminPort = await listen(adminServer, options.adminPort ?? config.server.adminPort, config.server.adminHost);
    cleanups.push(() => closeServer(adminServer, config.server.shutdownTimeoutMs));

    return {
      gatewayUrl: localUrl(config.server.host, gatewayPort),
      adminUrl: localUrl(config.server.adminHost, adminPort),
      inventory,
      adminToken,
      keys,
      close: closeAll,
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}
