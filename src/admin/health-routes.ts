import express from 'express';

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

export type ReadinessResult = { name: string; ok: boolean };

/** Every check at once; one that rejects is failing, whatever it threw. */
export function runReadinessChecks(checks: readonly ReadinessCheck[]): Promise<ReadinessResult[]> {
  return Promise.all(
    checks.map(async ({ name, check }) => {
      try {
        await check();
        return { name, ok: true };
      } catch {
        return { name, ok: false };
      }
    }),
  );
}

/** /healthz (the process runs), /readyz (its dependencies answer) and /metrics: no token, for probes and Prometheus. */
export function healthRoutes(readiness: readonly ReadinessCheck[], metrics: MetricsSource): express.Router {
  const router = express.Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const results = await runReadinessChecks(readiness);
    const failing = results.filter((r) => !r.ok).map((r) => r.name);
    if (failing.length === 0) {
      res.json({ status: 'ready', checks: Object.fromEntries(results.map((r) => [r.name, 'ok'])) });
      return;
    }
    res.status(503).json({ code: 'service_unavailable', message: `Not ready: ${failing.join(', ')} not answering.`, status: 503, failing });
  });
  router.get('/metrics', async (_req, res) => {
    const text = await metrics.text();
    res.setHeader('Content-Type', metrics.contentType);
    res.send(text);
  });
  return router;
}
