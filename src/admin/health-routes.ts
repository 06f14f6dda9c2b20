import express from 'express';
import { describeWriteFailure, StorageUnavailableError } from '../shared/sqlite/sqlite-failures';

/** What GET /metrics serves: this process's registry, or every worker's summed (src/workers). */
export interface MetricsSource {
  contentType: string;
  text(): Promise<string>;
}

/** A dependency /readyz checks; `check` rejects when it is not answering. */
export interface ReadinessCheck {
  name: string;
  check(): Promise<void>;
  /**
   * `shared`: something every instance shares (Redis, the inventory): shown in the body, never a
   * 503, since taking every instance out of the load balancer at once turns a brown-out into an
   * outage (CONTRACT §5). Default `instance`: a fault of this instance (a SQLite file it writes).
   */
  scope?: 'instance' | 'shared';
}

/**
 * The checks of /readyz: a fixed list, or one made at each request when files open after the start
 * (the usage events' files open when a reload turns them on).
 */
export type Readiness = readonly ReadinessCheck[] | (() => readonly ReadinessCheck[]);

/** The checks in force now. */
export function readinessChecksOf(readiness: Readiness): readonly ReadinessCheck[] {
  return typeof readiness === 'function' ? readiness() : readiness;
}

/** `reason` says why a database refuses writes (SQLITE_FULL: disk full, …); other checks just fail. */
export type ReadinessResult = { name: string; ok: boolean; reason?: string; shared?: boolean };

/** Every check at once; one that rejects is failing, whatever it threw. */
export function runReadinessChecks(checks: readonly ReadinessCheck[]): Promise<ReadinessResult[]> {
  return Promise.all(
    checks.map(async ({ name, check, scope }) => {
      const shared = scope === 'shared';
      try {
        await check();
        return { name, ok: true, shared };
      } catch (err) {
        return {
          name,
          ok: false,
          shared,
          reason: err instanceof StorageUnavailableError ? describeWriteFailure(err) : undefined,
        };
      }
    }),
  );
}

/** What /readyz reads besides its checks. */
export interface ReadinessOptions {
  /** Shown in the body (the upstream circuit's state). */
  details?: () => Record<string, string>;
  /** True once the process is shutting down: 503, so that the load balancer stops sending. */
  shuttingDown?: () => boolean;
}

function describeFailure(r: ReadinessResult): string {
  return r.reason ? `${r.name} cannot take writes (${r.reason})` : `${r.name} not answering`;
}

/**
 * /healthz (the process runs), /readyz (this instance can serve) and /metrics: no token, for
 * probes and Prometheus. /readyz is 503 only for this instance's own faults (CONTRACT §5): a SQLite
 * file it writes refusing writes, or shutting down. Shared dependencies (Redis, the inventory) and
 * the circuit are in the body with 200: `checks` says `ok` or why not, `degraded` names them.
 */
export function healthRoutes(
  readiness: Readiness,
  metrics: MetricsSource,
  options: ReadinessOptions = {},
): express.Router {
  const router = express.Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const results = await runReadinessChecks(readinessChecksOf(readiness));
    const details = options.details?.();
    const checks = Object.fromEntries(results.map((r) => [r.name, r.ok ? 'ok' : describeFailure(r)]));
    const ownFaults = results.filter((r) => !r.ok && !r.shared);
    if (options.shuttingDown?.()) {
      res.status(503).json({
        code: 'service_unavailable',
        message: 'Not ready: shutting down.',
        status: 503,
        failing: ['shutting down'],
        checks,
        ...details,
      });
      return;
    }
    if (ownFaults.length === 0) {
      const degraded = results.filter((r) => !r.ok).map((r) => r.name);
      res.json({
        status: degraded.length === 0 ? 'ready' : 'degraded',
        checks,
        ...(degraded.length > 0 ? { degraded } : {}),
        ...details,
      });
      return;
    }
    const failing = ownFaults.map((r) => r.name);
    res.status(503).json({
      code: 'service_unavailable',
      message: `Not ready: ${ownFaults.map(describeFailure).join('; ')}.`,
      status: 503,
      failing,
      checks,
      ...details,
    });
  });
  router.get('/metrics', async (_req, res) => {
    const text = await metrics.text();
    res.setHeader('Content-Type', metrics.contentType);
    res.send(text);
  });
  return router;
}
