import express, { type NextFunction, type Request, type Response } from 'express';
import type { Config, WindowLimits } from '../shared/config';
import type { Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { ApiError, errorHandler, sendError, type ErrorCode } from '../shared/errors';
import { UPSTREAM_TOKEN_HEADER, type UpstreamTokenSigner } from '../shared/upstream-token';
import type { AddressLimiter, FallbackKind, KeyLimiter, WindowState } from '../limits/types';
import type { ApiKeyRecord } from '../keys/types';
import type { KeyResolution } from '../keys/key-resolver';
import { requestIdFor } from './request-id';
import { ClientAddressResolver } from './client-address';
import { allowHeader, matchRoute, UNMATCHED_ROUTE, type RouteMatch } from './routes';
import { anonymousRateLimitHeaders, bannedRateLimitHeaders, keyRateLimitHeaders, retryAfterSeconds } from './rate-limit-headers';
import { buildDeprecations, deprecationKey, type DeprecationNotice } from './deprecation';
import { deprecatedRouteId } from './deprecation-report';
import type { Forwarder } from './forwarder';
import type { GatewayMetrics } from './metrics';

export type { KeyResolution };

/** What the gateway needs of the key resolver (src/keys/key-resolver.ts). */
export interface KeyLookup {
  resolve(presentedKey: string): Promise<KeyResolution>;
}

export interface GatewayDependencies {
  config: Config;
  keys: KeyLookup;
  keyLimiter: KeyLimiter;
  addressLimiter: AddressLimiter;
  signer: UpstreamTokenSigner;
  forwarder: Forwarder;
  metrics: GatewayMetrics;
  logger: Logger;
  clock: Clock;
  /** Remembers which keys call deprecated operations (GET /admin/deprecations); off the request path. */
  deprecationUsage?: { record(routeId: string, keyId: string): void };
}

/** Share of a window after which an admitted request counts in gateway_ratelimit_near_limit_total. */
const NEAR_LIMIT_SHARE = 0.8;

/** What one request has learned on its way through the chain. */
interface RequestState {
  requestId: string;
  startedAt: bigint;
  clientAddress: string;
  route: RouteMatch | null;
  /** The deprecation of this method and route, found once when the route is matched. */
  deprecation: DeprecationNotice | null;
  /** Plan label for metrics and logs: the key's plan, or `anonymous`. */
  plan: string;
  keyId: string | null;
  rateLimitOutcome: 'allowed' | 'limited' | 'banned' | 'anonymous' | 'anonymous_limited' | 'store_error' | null;
  /** Set when the limit was decided without the shared store (store.failMode `local` or `open`). */
  storeFallback: FallbackKind | null;
  upstreamStartedAt: bigint | null;
  /** Time to the upstream's response headers, for the log line. */
  upstreamMs: number | null;
}

declare module 'express-serve-static-core' {
  interface Locals {
    gateway: RequestState;
    apiKey?: ApiKeyRecord;
  }
}

/** Request headers that never reach the inventory: credentials, hop-by-hop, and our own internals. */
const STRIPPED_REQUEST_HEADERS = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-real-ip',
];
const INTERNAL_HEADER_PREFIX = 'x-gateway-';

const BEARER = /^Bearer +([^\s]+) *$/i;

export function createGatewayApp(deps: GatewayDependencies): express.Express {
  const { config, metrics, logger, clock } = deps;
  const addresses = new ClientAddressResolver(config.server.trustedProxies);
  const deprecations = buildDeprecations(config.deprecations);
  const planLimitsByName = new Map<string, WindowLimits>();
  for (const [name, plan] of Object.entries(config.plans)) {
    if (plan.perMinute !== undefined && plan.perDay !== undefined) {
      planLimitsByName.set(name, { perMinute: plan.perMinute, perDay: plan.perDay });
    }
  }
  const publicBase = config.server.publicBaseUrl ? new URL(config.server.publicBaseUrl) : null;

  /** Step 1: every response carries a request id; per-request state starts here. */
  function startRequest(req: Request, res: Response, next: NextFunction): void {
    const requestId = requestIdFor(req.headers['x-request-id']);
    res.setHeader('X-Request-Id', requestId);
    res.locals.gateway = {
      requestId,
      startedAt: process.hrtime.bigint(),
      clientAddress: addresses.resolve(req.socket.remoteAddress, req.headers['x-forwarded-for']),
      route: null,
      plan: 'anonymous',
      keyId: null,
      deprecation: null,
      rateLimitOutcome: null,
      storeFallback: null,
      upstreamStartedAt: null,
      upstreamMs: null,
    };
    res.once('finish', () => recordFinished(req, res));
    next();
  }

  /** Only the versioned API is served on the public listener. */
  function requireApiPath(req: Request, res: Response, next: NextFunction): void {
    if (req.path === '/v1' || req.path.startsWith('/v1/')) return next();
    sendError(res, 'not_found', 'No such resource. The API lives under /v1.');
  }

  /**
   * Which operation, learned early so that a deprecated one says so on every response, 401 and
   * 429 included (CONTRACT §3). Unknown paths and methods are refused later, once counted.
   */
  function announceDeprecation(req: Request, res: Response, next: NextFunction): void {
    const state = res.locals.gateway;
    state.route = matchRoute(req.path);
    state.deprecation = (state.route && deprecations.get(deprecationKey(req.method, state.route.relativeTemplate))) ?? null;
    if (state.deprecation) setHeaders(res, state.deprecation.headers);
    next();
  }

  /** Step 2: who is calling. Requests without a valid key are limited per address, then refused. */
  async function authenticate(req: Request, res: Response, next: NextFunction): Promise<void> {
    const state = res.locals.gateway;
    const header = req.headers.authorization;
    let failure: { code: ErrorCode; message: string; reason: string };
    if (header === undefined || header === '') {
      failure = { code: 'missing_api_key', reason: 'missing', message: 'Send your API key as "Authorization: Bearer <key>".' };
    } else if (hasRepeatedAuthorization(req.rawHeaders)) {
      // Node keeps the first of several; which one a client meant is anyone's guess, so none counts.
      failure = { code: 'invalid_api_key', reason: 'invalid', message: 'Send exactly one Authorization header.' };
    } else {
      const presented = BEARER.exec(header)?.[1];
      const resolution: KeyResolution = presented ? await resolveKey(presented, res) : { status: 'invalid' };
      if (resolution.status === 'valid') {
        state.keyId = resolution.record.id;
        state.plan = resolution.record.plan;
        res.locals.apiKey = resolution.record;
        return next();
      }
      failure =
        resolution.status === 'revoked'
          ? { code: 'revoked_api_key', reason: 'revoked', message: 'This API key has been revoked.' }
          : { code: 'invalid_api_key', reason: 'invalid', message: 'The API key is not valid for this environment.' };
    }
    metrics.authFailures.inc({ reason: failure.reason });
    const decision = await limitAnonymous(state.clientAddress, res);
    if (!decision.allowed) {
      state.rateLimitOutcome = 'anonymous_limited';
      metrics.rejections.inc({ plan: 'anonymous', window: 'anonymous' });
      throw new ApiError('rate_limited', 'Too many requests without a valid API key from this address.', {
        'Retry-After': retryAfterSeconds(decision.retryAfterMs),
      });
    }
    state.rateLimitOutcome = 'anonymous';
    throw new ApiError(failure.code, failure.message);
  }

  async function resolveKey(presented: string, res: Response): Promise<KeyResolution> {
    try {
      return await deps.keys.resolve(presented);
    } catch (err) {
      storeFailed(err, res);
    }
  }

  async function limitAnonymous(address: string, res: Response) {
    try {
      const decision = await deps.addressLimiter.consume(address);
      if (decision.fallback) res.locals.gateway.storeFallback = decision.fallback;
      setHeaders(res, anonymousRateLimitHeaders(decision.window, clock.now()));
      return decision;
    } catch (err) {
      storeFailed(err, res);
    }
  }

  function storeFailed(err: unknown, res: Response): never {
    metrics.storeErrors.inc();
    res.locals.gateway.rateLimitOutcome = 'store_error';
    logger.error({ err, requestId: res.locals.gateway.requestId }, 'store unavailable');
    throw new ApiError('service_unavailable', 'The gateway cannot reach its store right now. Retry shortly.', { 'Retry-After': '1' });
  }

  /** Step 3: the ban and both windows, decided together in one store round trip. */
  async function limitRate(_req: Request, res: Response, next: NextFunction): Promise<void> {
    const state = res.locals.gateway;
    const record = res.locals.apiKey!;
    const limits = record.limits ?? planLimitsByName.get(record.plan);
    if (!limits) throw new Error(`key ${record.id} has plan ${record.plan} without limits`);
    let decision;
    try {
      decision = await deps.keyLimiter.consume(record.id, limits);
    } catch (err) {
      storeFailed(err, res);
    }
    if (decision.fallback) {
      state.storeFallback = decision.fallback;
      if (decision.fallback === 'open') metrics.unenforced.inc({ plan: record.plan });
    }
    if (decision.outcome === 'banned') {
      state.rateLimitOutcome = 'banned';
      setHeaders(res, bannedRateLimitHeaders(limits, decision.bannedUntil, decision.now));
      metrics.rejections.inc({ plan: record.plan, window: 'ban' });
      throw new ApiError('temporarily_banned', 'This API key is temporarily banned for retrying after 429 responses. Use exponential backoff.', {
        'Retry-After': retryAfterSeconds(decision.bannedUntil - decision.now),
      });
    }
    if (decision.outcome === 'limited') {
      state.rateLimitOutcome = 'limited';
      setHeaders(res, keyRateLimitHeaders(decision.minute, decision.day, decision.now, decision.refusedBy));
      metrics.rejections.inc({ plan: record.plan, window: decision.refusedBy });
      if (decision.bannedNow) metrics.keyBans.inc({ plan: record.plan });
      throw new ApiError('rate_limited', `The ${decision.refusedBy} limit of this API key is used up.`, {
        'Retry-After': retryAfterSeconds(decision.retryAfterMs),
      });
    }
    state.rateLimitOutcome = 'allowed';
    countNearLimit(record.plan, 'minute', decision.minute);
    countNearLimit(record.plan, 'day', decision.day);
    setHeaders(res, keyRateLimitHeaders(decision.minute, decision.day, decision.now));
    next();
  }

  /** Counts the one admitted request per window that takes a key past 80 % of it. */
  function countNearLimit(plan: string, window: 'minute' | 'day', state: WindowState): void {
    if (state.limit - state.remaining === Math.ceil(state.limit * NEAR_LIMIT_SHARE)) metrics.nearLimit.inc({ plan, window });
  }

  /** Step 4: unknown paths and methods end here, still counted and limited. */
  function routeRequest(req: Request, res: Response, next: NextFunction): void {
    const route = res.locals.gateway.route;
    if (!route) throw new ApiError('not_found', 'No such resource.');
    if (!route.allowedMethods.includes(req.method)) {
      throw new ApiError('method_not_allowed', `${req.method} is not allowed here.`, { Allow: allowHeader(route) });
    }
    next();
  }

  /** Step 5: deprecated operations (headers already set) are gone after their sunset. */
  function applyDeprecation(req: Request, res: Response, next: NextFunction): void {
    const route = res.locals.gateway.route!;
    const notice = res.locals.gateway.deprecation;
    if (!notice) return next();
    metrics.deprecatedRequests.inc({ route: route.template, plan: res.locals.gateway.plan });
    deps.deprecationUsage?.record(deprecatedRouteId(req.method, route.template), res.locals.gateway.keyId!);
    if (clock.now() >= notice.sunsetAt) {
      throw new ApiError('gone', 'This operation has passed its sunset date. Use the successor version.');
    }
    next();
  }

  /** Step 6: sign, rewrite headers, and stream to the inventory with the body bounded. */
  async function forward(req: Request, res: Response): Promise<void> {
    const state = res.locals.gateway;
    const declaredLength = Number(req.headers['content-length'] ?? 0);
    if (declaredLength > config.server.maxBodyBytes) {
      res.setHeader('Connection', 'close');
      throw new ApiError('payload_too_large', `The request body is larger than ${config.server.maxBodyBytes} bytes.`);
    }
    const token = await deps.signer.sign({ keyId: state.keyId!, plan: state.plan });
    rewriteHeadersForUpstream(req, state, token);
    req.url = originForm(req);

    state.upstreamStartedAt = process.hrtime.bigint();
    const abandon = deps.forwarder.forward(req, res, {
      onResponse: (statusCode) => observeUpstream(req, state, statusCode),
      onFailure: (failure) => {
        metrics.upstreamErrors.inc({ reason: failure.reason });
        logger.warn({ requestId: state.requestId, reason: failure.reason }, 'upstream failure');
        sendError(res, failure.code, failure.message);
      },
    });
    if (req.headers['transfer-encoding'] !== undefined) boundStreamedBody(req, res, abandon);
  }

  /** A chunked body has no declared length: count it as it streams and stop at the limit. */
  function boundStreamedBody(req: Request, res: Response, abandon: () => void): void {
    let received = 0;
    req.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received <= config.server.maxBodyBytes || res.headersSent) return;
      abandon();
      req.unpipe();
      res.setHeader('Connection', 'close');
      sendError(res, 'payload_too_large', `The request body is larger than ${config.server.maxBodyBytes} bytes.`);
    });
  }

  function rewriteHeadersForUpstream(req: Request, state: RequestState, token: string): void {
    const headers = req.headers;
    const connectionListed = typeof headers.connection === 'string' ? headers.connection.split(',') : [];
    for (const name of connectionListed) delete headers[name.trim().toLowerCase()];
    for (const name of STRIPPED_REQUEST_HEADERS) delete headers[name];
    for (const name of Object.keys(headers)) {
      if (name.startsWith(INTERNAL_HEADER_PREFIX)) delete headers[name];
    }
    headers[UPSTREAM_TOKEN_HEADER] = token;
    headers['x-request-id'] = state.requestId;
    headers['x-forwarded-for'] = state.clientAddress;
    headers['x-forwarded-proto'] = publicBase ? publicBase.protocol.slice(0, -1) : 'http';
    headers['x-forwarded-host'] = publicBase ? publicBase.host : (req.headers.host ?? 'localhost');
  }

  function observeUpstream(req: Request, state: RequestState, statusCode: number): void {
    if (state.upstreamStartedAt === null) return;
    const seconds = Number(process.hrtime.bigint() - state.upstreamStartedAt) / 1e9;
    state.upstreamMs = Math.round(seconds * 1e6) / 1e3;
    metrics.upstreamDuration.observe({ method: req.method, route: state.route?.template ?? UNMATCHED_ROUTE, status_code: String(statusCode) }, seconds);
  }

  function recordFinished(req: Request, res: Response): void {
    const state = res.locals.gateway;
    const route = state.route?.template ?? UNMATCHED_ROUTE;
    const statusCode = String(res.statusCode);
    const seconds = Number(process.hrtime.bigint() - state.startedAt) / 1e9;
    metrics.httpRequests.inc({ method: req.method, route, status_code: statusCode, plan: state.plan });
    metrics.httpDuration.observe({ method: req.method, route, status_code: statusCode }, seconds);
    logger.info(
      {
        requestId: state.requestId,
        method: req.method,
        route,
        status: res.statusCode,
        durationMs: Math.round(seconds * 1e6) / 1e3,
        upstreamMs: state.upstreamMs,
        plan: state.plan,
        keyId: state.keyId,
        clientAddress: state.clientAddress,
        rateLimit: state.rateLimitOutcome,
        storeFallback: state.storeFallback ?? undefined,
      },
      'request',
    );
  }

  /**
   * Express's router gives up on a request target url.parse refuses (`GET http://[::1/v1/pets`): no
   * middleware runs and Express's own final handler answers an HTML 404 without X-Request-Id. The
   * gateway's final handler answers those (and anything else that ever falls through) itself.
   */
  function finalHandler(req: Request, res: Response): NextFunction {
    return (err?: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      res.setHeader('X-Request-Id', requestIdFor(req.headers['x-request-id']));
      if (err) {
        logger.error({ err }, 'unhandled gateway error');
        sendError(res, 'internal_error', 'An internal error occurred.');
      } else {
        sendError(res, 'invalid_parameter', 'The request target is not a valid URL.');
      }
    };
  }

  const app = express();
  const routed = app as express.Express & { handle(req: Request, res: Response, done?: NextFunction): void };
  const handle = routed.handle.bind(app);
  routed.handle = (req, res, done) => handle(req, res, done ?? finalHandler(req, res));
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('query parser', false);
  app.use(startRequest, requireApiPath, announceDeprecation, authenticate, limitRate, routeRequest, applyDeprecation, forward);
  app.use(
    errorHandler((err) => logger.error({ err }, 'unhandled gateway error')),
  );
  return app;
}

/**
 * The request target in origin form (`/v1/pets?limit=1`) whatever form the client used: an
 * absolute-form target (`GET foo://host/v1/pets`) was routed on its path, and undici refuses a path
 * that neither starts with `/` nor with a lower-case `http://` or `https://`.
 */
function originForm(req: Request): string {
  if (req.url.startsWith('/')) return req.url;
  const queryAt = req.url.indexOf('?');
  return req.path + (queryAt === -1 ? '' : req.url.slice(queryAt));
}

function hasRepeatedAuthorization(rawHeaders: string[]): boolean {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization' && ++seen > 1) return true;
  }
  return false;
}

function setHeaders(res: Response, headers: Record<string, string>): void {
  for (const name in headers) res.setHeader(name, headers[name]!);
}
