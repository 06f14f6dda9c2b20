import express, { type Request, type RequestHandler, type Response, type Router } from 'express';
import pinoHttp from 'pino-http';
import type { Logger } from '../shared/logger';
import type { UpstreamClaims } from '../shared/http/upstream-token';
import type { InventoryMetrics } from './metrics';
import { UNMATCHED_ROUTE } from '../shared/public-api';

interface InventoryRequestState {
  startedAt: bigint;
  /** Route template once a route matched (`/v1/pets/{petId}`), else UNMATCHED_ROUTE. */
  route: string;
  /** Set the first time it is read, so the metrics and the log line agree. */
  seconds: number | null;
}

declare module 'express-serve-static-core' {
  interface Locals {
    inventory: InventoryRequestState;
  }
}

/** Routes whose request lines are debug: probes and scrapes arrive every few seconds and say nothing. */
const PROBE_ROUTES = new Set(['/healthz', '/readyz', '/metrics']);

/** `/v1/pets/:petId` → `/v1/pets/{petId}`: the gateway's spelling of a template (src/gateway/operations/routes.ts). */
export function routeTemplate(expressPath: string): string {
  return expressPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

function elapsedSeconds(state: InventoryRequestState): number {
  state.seconds ??= Number(process.hrtime.bigint() - state.startedAt) / 1e9;
  return state.seconds;
}

/**
 * Names the route of a request before anything can refuse it, with express's own matcher and the
 * same paths the routes are mounted on, so a 401 for `/v1/pets` is counted under `/v1/pets` and
 * only paths no route would take share UNMATCHED_ROUTE. Labels never hold a raw path.
 */
export function labelRoutes(expressPaths: readonly string[]): Router {
  const router = express.Router({ caseSensitive: true, strict: true });
  for (const path of expressPaths) {
    const template = routeTemplate(path);
    router.all(path, (_req, res, next) => {
      res.locals.inventory.route = template;
      next();
    });
  }
  return router;
}

/** The one JSON line per request: ids and labels only, never a header, a token or a body. */
function requestLine(req: Request, res: Response): Record<string, unknown> {
  const state = res.locals.inventory;
  const caller = res.locals.caller as UpstreamClaims | undefined;
  return {
    requestId: res.locals.requestId as string,
    method: req.method,
    route: state.route,
    status: res.statusCode,
    durationMs: Math.round(elapsedSeconds(state) * 1e6) / 1e3,
    keyId: caller?.keyId ?? null,
    ...(res.writableEnded ? {} : { aborted: true }),
  };
}

/**
 * Per-request metrics and the request log line. Goes right after `requestId`: the timer starts
 * here, and the log line reuses the request id that middleware chose (the gateway's X-Request-Id
 * when sane) as pino-http's id, so a request has one id everywhere.
 */
export function observeRequests({ metrics, logger }: { metrics: InventoryMetrics; logger: Logger }): RequestHandler[] {
  const startTimer: RequestHandler = (req, res, next) => {
    res.locals.inventory = { startedAt: process.hrtime.bigint(), route: UNMATCHED_ROUTE, seconds: null };
    res.once('finish', () => {
      const state = res.locals.inventory;
      const labels = { method: req.method, route: state.route, status_code: String(res.statusCode) };
      metrics.httpRequests.inc(labels);
      metrics.httpDuration.observe(labels, elapsedSeconds(state));
    });
    next();
  };

  const logRequest = pinoHttp<Request, Response>({
    logger,
    genReqId: (_req, res) => res.locals.requestId as string,
    // No `req` on the line at all: pino-http would bind every header, Authorization and the
    // gateway token included. The redact paths in src/shared/logger.ts stay as a second guard.
    wrapSerializers: false,
    serializers: { req: () => undefined },
    customLogLevel: (_req, res, err) => {
      if (PROBE_ROUTES.has(res.locals.inventory.route)) return 'debug';
      return err || res.statusCode >= 500 ? 'error' : 'info';
    },
    customSuccessObject: requestLine,
    // A 5xx takes this path with a generic Error; the real one is logged with its stack by
    // logInternalErrors, so the request line stays the same shape.
    customErrorObject: (req, res) => requestLine(req, res),
    customSuccessMessage: () => 'request',
    customErrorMessage: () => 'request',
  });

  return [startTimer, logRequest];
}
