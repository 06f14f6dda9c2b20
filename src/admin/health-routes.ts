import express from 'express';
import { describeWriteFailure, StorageUnavailableError } from '../shared/sqlite-failures';

/** What GET /metrics serves: this process's registry, or every worker's summed (src/workers). */
export interface MetricsSource {
  contentType: string;
  text(): Promise<string>;
}

/** A dependency /readyz checks; `check` rejects when it is not answering. */
export interface ReadinessCheck {
  name: string;
  check(): Promise<void>;
}

/** `reason` says why a database refuses writes (SQLITE_FULL: disk full, …); other checks just fail. */
export type ReadinessResult = { name: string; ok: boolean; reason?: string };

/** Every check at once; one that rejects is failing, whatever it threw. */
export function runReadinessChecks(checks: readonly ReadinessCheck[]): Promise<ReadinessResult[]> {
  return Promise.all(
    checks.map(async ({ name, check }) => {
      try {
        await check();
        return { name, ok: true };
      } catch (err) {
        return { name, ok: false, reason: err instanceof StorageUnavailableError ? describeWriteFailure(err) : undefined };
      }
    }),
  );
}

/** /healthz (the process runs), /readyz (its dependencies answer) and /metrics: no token, for probes and Prometheus. */
export function healthRoutes(readiness: readonly ReadinessCheck[], metrics: MetricsSource, readinessDetails?: () => Record<string, string>): express.Router {
  const router = express.Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const results = await runReadinessChecks(readiness);
    const failed = results.filter((r) => !r.ok);
    const failing = failed.map((r) => r.name);
    const details = readinessDetails?.();
    if (failing.length === 0) {
      res.json({ status: 'ready', checks: Object.fromEntries(results.map((r) => [r.name, 'ok'])), ...details });
      return;
    }
    const reasons = failed.map((r) => (r.reason ? `${r.name} cannot take writes (${r.reason})` : `${r.name} not answering`));
    res.status(503).json({ code: 'service_unavailable', message: `Not ready: ${reasons.join('; ')}.`, status: 503, failing, ...details });
  });
  router.get('/metrics', async (_req, res) => {
    const text = await metrics.text();
    res.setHeader('Content-Type', metrics.contentType);
    res.send(text);
  });
  return router;
}
