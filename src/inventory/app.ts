import express, { type Express, type Response } from 'express';
import { Registry } from 'prom-client';
import { errorHandler, sendError } from '../shared/errors';
import { describeWriteFailure } from '../shared/sqlite/sqlite-failures';
import type { Logger } from '../shared/logger';
import { tracing } from '../shared/telemetry/telemetry';
import type { UpstreamTokenVerifier } from '../shared/http/upstream-token';
import { logInternalErrors, methodNotAllowed, notFound, requestId, requireGatewayToken } from './middleware';
import { createInventoryMetrics, type InventoryMetrics } from './metrics';
import { BASE_PATH, UNMATCHED_ROUTE } from '../shared/public-api';
import type { PetRepository } from './pet-repository';
import { createPetsRouter, PETS_ROUTE_PATHS } from './pets-routes';
import { labelRoutes, observeRequests, routeTemplate } from './request-observer';
import { enforceLabelAllowlist, LabelAllowlist } from '../shared/metrics/metric-labels';

const PROBE_PATHS = ['/healthz', '/readyz', '/metrics'] as const;

export interface InventoryAppDeps {
  repository: PetRepository;
  verifier: Pick<UpstreamTokenVerifier, 'verify'>;
  logger: Logger;
  /** Largest accepted request body now (config server.maxBodyBytes in force); larger is 413. */
  maxBodyBytes: () => number;
  /**
   * Where requests are counted and timed, served at GET /metrics. Defaults to a fresh registry;
   * pass the one the repository was built with so its query timings are served too.
   */
  metrics?: InventoryMetrics;
}

/**
 * The inventory as a plain express app, with no listener and no database of its own: whoever
 * embeds it supplies the repository and the verifier. A request reads top to bottom: request id,
 * metrics and log line, route label, health and metrics (no token), gateway token for /v1, routes,
 * 404, errors.
 */
export function createInventoryApp({
  repository,
  verifier,
  logger,
  maxBodyBytes,
  metrics = createInventoryMetrics(new Registry()),
}: InventoryAppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('case sensitive routing', true);
  app.set('strict routing', true);
  // GET /v1/pets reads its own query string (parseListQuery) so repeated and bracketed keys are seen.
  app.set('query parser', false);

  // First, so that everything after it (the log line included) runs inside the request's span; on
  // the API only, so that probes and scrapes make no traces.
  const traces = tracing();
  if (traces)
    app.use(
      BASE_PATH,
      traces.inventoryMiddleware((res) => (res as Response).locals.inventory?.route ?? UNMATCHED_ROUTE),
    );
  app.use(requestId);
  app.use(observeRequests({ metrics, logger }));
  const labelledPaths = [...PROBE_PATHS, ...PETS_ROUTE_PATHS.map((path) => BASE_PATH + path)];
  app.use(labelRoutes(labelledPaths));
  // The method a client sends, and every other label, counted within closed sets (CONTRACT §6).
  enforceLabelAllowlist(metrics.registry, new LabelAllowlist({ route: labelledPaths.map(routeTemplate) }));

  app
    .route('/healthz')
    .get((_req, res) => {
      res.json({ status: 'ok' });
    })
    .all(methodNotAllowed(['GET', 'HEAD']));
  app
    .route('/readyz')
    .get((_req, res) => {
      try {
        repository.ping();
      } catch (err) {
        logger.warn({ err }, 'readiness check failed: database');
        sendError(res, 'service_unavailable', 'The inventory database does not answer.');
        return;
      }
      try {
        repository.checkWrites();
      } catch (err) {
        // The reason (SQLITE_FULL: disk full, …) is for the operator; this listener is not public.
        logger.warn({ err }, 'readiness check failed: the database cannot take writes');
        sendError(
          res,
          'service_unavailable',
          `The inventory database cannot take writes (${describeWriteFailure(err)}).`,
        );
        return;
      }
      res.json({ status: 'ok' });
    })
    .all(methodNotAllowed(['GET', 'HEAD']));

  // Prometheus text for whoever can reach this listener: the gateway forwards only /v1/*, so
  // this is never served through it.
  app
    .route('/metrics')
    .get(async (_req, res) => {
      const body = await metrics.registry.metrics();
      res.setHeader('Content-Type', metrics.registry.contentType);
      res.send(body);
    })
    .all(methodNotAllowed(['GET', 'HEAD']));

  app.use(BASE_PATH, requireGatewayToken(verifier));
  app.use(BASE_PATH, createPetsRouter(repository, maxBodyBytes));
  app.use(notFound);
  app.use(logInternalErrors(logger));
  app.use(errorHandler());
  return app;
}
