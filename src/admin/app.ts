import express, { type NextFunction, type Request, type Response } from 'express';
import { StorageUnavailableError } from '../shared/sqlite/sqlite-failures';
import { errorHandler, sendError } from '../shared/errors';
import { isRedisUnavailable, StoreUnreachableError } from '../shared/redis/redis-failures';
import type { Logger } from '../shared/logger';
import { systemClock, type Clock } from '../shared/clock';
import type { KeyLimiter } from '../limits/types';
import type { DeprecationReport } from './deprecation-report';
import type { AuditLog } from './audit-log';
import { buildStatsReport } from './stats/stats-report';
import type { TrafficSecond } from './stats/traffic-recorder';
import { consoleRouter } from './console/console-router';
import { plansRouter, type ConfiguredPlan } from './plans-route';
import { keyBackupRoutes, type KeyBackup } from './key-backup-routes';
import { creditRoutes } from './credit-routes';
import { windowResetRoutes } from './window-reset-routes';
import { consumerRoutes } from './consumer-routes';
import type { ConsumerService } from '../consumers/consumer-service';
import { requireAdminToken } from './admin-token';
import { createAuditTrail, type ConfirmWrite } from './audit-trail';
import {
  healthRoutes,
  readinessChecksOf,
  runReadinessChecks,
  type MetricsSource,
  type Readiness,
  type ReadinessCheck,
} from './health-routes';
import { keyRoutes, type KeyAdministration as KeyLifecycle, type KeyUsageHistory } from './key-routes';
import { intParameter } from './request-parsing';
import { configRoutes, type ConfigAdministration } from './config-routes';
import { usageExportRoutes, type UsageExport } from './usage-export-routes';
import { topKeysRoute, type TopKeysDependencies } from './stats/top-keys-route';
import { secretScanningRoute, type SecretScanningDependencies } from './secret-scanning-route';
import type { ApiKeyRecord } from '../keys/types';

export type { MetricsSource, ReadinessCheck, KeyUsageHistory };

/** What the admin API needs from the key service. */
export interface KeyAdministration extends KeyLifecycle, KeyBackup {}

export interface AdminDependencies {
  adminToken: string;
  /** Config `admin.failedTokensPerMinute`: per address. */
  failedTokensPerMinute: number;
  /** Config `admin.failedTokensPerMinuteTotal`: over all addresses together. */
  failedTokensPerMinuteTotal: number;
  /** Each refused admin token (`missing` or `invalid`), with the client's address: gateway_admin_auth_failures_total. */
  onFailedToken?: (reason: 'missing' | 'invalid' | 'locked_out', address: string) => void;
  clock?: Clock;
  keyService: KeyAdministration;
  /** /admin/consumers (CONTRACT §5). */
  consumerService?: ConsumerService;
  /** GET /admin/keys/export and POST /admin/keys/import; default the key service's (keys only). */
  keyBackup?: KeyBackup;
  keyLimiter: KeyLimiter;
  keyActivity: KeyUsageHistory;
  auditLog: AuditLog;
  metrics: MetricsSource;
  readiness: Readiness;
  /** States /readyz reports beside its checks without failing on them (the upstream circuit breaker's). */
  readinessDetails?: () => Record<string, string>;
  /** True once the process is shutting down: /readyz answers 503. */
  shuttingDown?: () => boolean;
  /** GET /admin/config and POST /admin/reload. */
  config: ConfigAdministration;
  /** Who called deprecated operations in the last 30 days (GET /admin/deprecations). */
  deprecations: () => Promise<DeprecationReport>;
  /** The last 15 minutes of this process's traffic, per second (every worker's, summed, under WORKERS > 1). */
  trafficSeconds: () => Promise<TrafficSecond[]>;
  /** The plans in force (config `plans`), listed by GET /admin/plans for the console's plan choices. */
  plans: () => Readonly<Record<string, ConfiguredPlan>>;
  logger: Logger;
  /** The body limit in force (config server.maxBodyBytes, which a reload may change). */
  maxBodyBytes: () => number;
  /** After each write, before its answer and audit entry: waits for a replica (admin/write-replication-report.ts). */
  confirmWrite?: ConfirmWrite;
  /** GET /admin/usage/export: the lines of a range of UTC days (src/usage/usage-export.ts). */
  usageExport?: UsageExport;
  /** GET /admin/stats/top-keys: the busiest keys across every instance. */
  topKeys?: TopKeysDependencies;
  /** POST /admin/secret-scanning, behind the partner's signature instead of the admin token. */
  secretScanning?: SecretScanningDependencies;
  /** After DELETE /admin/keys/{id}: the `key.revoked` webhook (`by: "admin"`). */
  onKeyRevoked?: (record: ApiKeyRecord) => void;
}

/** A write the key store refused is answered 503 with nothing stored; the operator learns why here. */
function logRefusedWrites(logger: Logger) {
  return (err: unknown, _req: Request, _res: Response, next: NextFunction): void => {
    if (err instanceof StorageUnavailableError) {
      logger.error(
        { database: err.database, sqliteCode: err.sqliteCode, detail: err.detail },
        'admin write refused: the database cannot take it',
      );
    }
    next(err);
  };
}

/**
 * A request that needed Redis while it cannot be reached (a failover, an outage) is answered 503
 * with Retry-After, not 500: nothing is wrong with the gateway, and the client can try again.
 */
function answerStoreOutages(logger: Logger) {
  return (err: unknown, req: Request, _res: Response, next: NextFunction): void => {
    const cause = (err as { cause?: unknown } | null)?.cause;
    const unavailable = isRedisUnavailable(err) ? err : isRedisUnavailable(cause) ? cause : null;
    if (unavailable === null) return next(err);
    const detail = (unavailable as Error).message;
    logger.warn(
      { method: req.method, route: req.route?.path, err: detail },
      'admin request refused: the store is unreachable',
    );
    next(new StoreUnreachableError(detail));
  };
}

/**
 * The admin listener: health and metrics without a token; `/admin/*` behind the admin token (keys,
 * backups, audit, plans, deprecations, stats); the console's static files.
 */
export function createAdminApp(deps: AdminDependencies): express.Express {
  const { keyService, logger } = deps;
  const clock = deps.clock ?? systemClock;
  const audit = createAuditTrail(deps.auditLog, logger, clock, deps.confirmWrite);

  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.use(
    healthRoutes(deps.readiness, deps.metrics, { details: deps.readinessDetails, shuttingDown: deps.shuttingDown }),
  );

  // A secret-scanning partner holds no admin token: its report is signed instead (checked there).
  if (deps.secretScanning) app.use(secretScanningRoute(deps.secretScanning));

  const admin = express.Router();
  admin.use(requireAdminToken({ ...deps, clock, logger }));
  // Before /keys/:id, which would otherwise take `export` for an id.
  admin.use(keyBackupRoutes(deps.keyBackup ?? keyService, audit));
  admin.use(
    keyRoutes({
      keyService,
      keyLimiter: deps.keyLimiter,
      keyActivity: deps.keyActivity,
      audit,
      maxBodyBytes: deps.maxBodyBytes,
      onRevoked: deps.onKeyRevoked,
    }),
  );
  if (deps.consumerService)
    admin.use(consumerRoutes({ consumers: deps.consumerService, audit, maxBodyBytes: deps.maxBodyBytes }));
  admin.use(creditRoutes({ keyService, keyLimiter: deps.keyLimiter, audit, maxBodyBytes: deps.maxBodyBytes }));
  admin.use(
    windowResetRoutes({
      keyService,
      consumers: deps.consumerService,
      keyLimiter: deps.keyLimiter,
      audit,
      maxBodyBytes: deps.maxBodyBytes,
    }),
  );
  admin.get('/audit', async (req, res) => {
    const limit = intParameter(req.query.limit, 'limit', 1, 1000, 100);
    res.json({ entries: await deps.auditLog.recent(limit) });
  });
  admin.use(plansRouter(deps.plans));
  admin.use(configRoutes(deps.config));
  admin.get('/deprecations', async (_req, res) => {
    res.json(await deps.deprecations());
  });
  admin.get('/stats', async (_req, res) => {
    const [seconds, checks, activeBans] = await Promise.all([
      deps.trafficSeconds(),
      runReadinessChecks(readinessChecksOf(deps.readiness)),
      // A store outage shows as a failing check; the ban count is then unknown, not an error.
      deps.keyLimiter.activeBans().catch(() => null),
    ]);
    const health = Object.fromEntries(
      checks.map(({ name, ok }) => [name, ok ? ('ok' as const) : ('failing' as const)]),
    );
    res.json(buildStatsReport({ seconds, nowMs: clock.now(), activeBans, health }));
  });
  if (deps.topKeys) admin.use(topKeysRoute(deps.topKeys));
  if (deps.usageExport) admin.use(usageExportRoutes(deps.usageExport));

  app.use('/admin', admin);
  app.use('/console', consoleRouter());
  app.use((_req, res) => sendError(res, 'not_found', 'No such resource.'));
  app.use(logRefusedWrites(logger));
  app.use(answerStoreOutages(logger));
  app.use(errorHandler((err) => logger.error({ err }, 'unhandled admin error')));
  return app;
}
