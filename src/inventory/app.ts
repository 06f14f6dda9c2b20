import express, { type Express } from 'express';
import { errorHandler, sendError } from '../shared/errors';
import type { Logger } from '../shared/logger';
import type { UpstreamTokenVerifier } from '../shared/upstream-token';
import { logInternalErrors, methodNotAllowed, notFound, requestId, requireGatewayToken } from './middleware';
import type { PetRepository } from './pet-repository';
import { createPetsRouter } from './pets-routes';

export interface InventoryAppDeps {
  repository: PetRepository;
  verifier: Pick<UpstreamTokenVerifier, 'verify'>;
  logger: Logger;
  /** Largest accepted request body (config.server.maxBodyBytes); larger is 413. */
  maxBodyBytes: number;
}

/**
 * The inventory as a plain express app, with no listener and no database of its own: whoever
 * embeds it supplies the repository and the verifier. A request reads top to bottom: request id,
 * health (no token), gateway token for /v1, routes, 404, errors.
 */
export function createInventoryApp({ repository, verifier, logger, maxBodyBytes }: InventoryAppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('case sensitive routing', true);
  app.set('strict routing', true);
  // GET /v1/pets reads its own query string (parseListQuery) so repeated and bracketed keys are seen.
  app.set('query parser', false);

  app.use(requestId);

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
      res.json({ status: 'ok' });
    })
    .all(methodNotAllowed(['GET', 'HEAD']));

  app.use('/v1', requireGatewayToken(verifier));
  app.use('/v1', createPetsRouter(repository, maxBodyBytes));
  app.use(notFound);
  app.use(logInternalErrors(logger));
  app.use(errorHandler());
  return app;
}
