import type { IncomingHttpHeaders, IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Config, WindowLimits } from '../shared/config';
import type { Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';
import { tracing, type GatewayRequestSpan } from '../shared/telemetry';
import { sendError, type ErrorCode } from '../shared/errors';
import { UPSTREAM_TOKEN_HEADER, type UpstreamTokenSigner } from '../shared/upstream-token';
import type { AddressLimiter, ConsumeOptions, FallbackKind, KeyDecision, KeyLimiter, WindowState } from '../limits/types';
import type { ApiKeyRecord } from '../keys/types';
import type { KeyResolution } from '../keys/key-resolver';
import { requestIdFor } from './request-id';
import { cutOffReason } from './cut-off';
import { ClientAddressResolver } from './client-address';
import { allowHeader, BASE_PATH, matchRoute, UNMATCHED_ROUTE, type RouteMatch } from './routes';
import {
  anonymousRateLimitHeaders,
  bannedRateLimitHeaders,
  jitteredRetryAfterSeconds,
  keyRateLimitHeaders,
  type RandomSource,
} from './rate-limit-headers';
import { buildDeprecations, deprecationKey, type DeprecationNotice } from './deprecation';
import { deprecatedRouteId } from './deprecation-report';
import { createCorsPolicy } from './cors';
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
  /** Uniform [0, 1) numbers for Retry-After jitter; Math.random unless a test fixes it. */
  random?: RandomSource;
  /** Remembers which keys call deprecated operations (GET /admin/deprecations); off the request path. */
  deprecationUsage?: { record(routeId: string, keyId: string): void };
  /** Counts each key's admitted, rate-limited and banned requests and its last use; off the request path. */
  keyActivity?: { record(keyId: string, outcome: 'admitted' | 'rateLimited' | 'banned'): void };
}

/**
 * The limiter's outcomes that a key's usage history counts. A request over a shadowed limit was
 * forwarded, so it counts as admitted; gateway_ratelimit_shadow_denied_total says it would not have been.
 */
const USAGE_OUTCOMES = { allowed: 'admitted', shadow_limited: 'admitted', limited: 'rateLimited', banned: 'banned' } as const;

/** Share of a window after which an admitted request counts in gateway_ratelimit_near_limit_total. */
const NEAR_LIMIT_SHARE = 0.8;

/** What one request has learned on its way through the chain. */
interface RequestState {
  requestId: string;
  startedAt: bigint;
  clientAddress: string;
  /** The target's path (no query), what routing sees; null when the target is not a URL at all. */
  path: string | null;
  /** The target as the inventory gets it: origin form, whatever form the client used. */
  originForm: string;
  route: RouteMatch | null;
  /** The deprecation of this method and route, found once when the route is matched. */
  deprecation: DeprecationNotice | null;
  /** Plan label for metrics and logs: the key's plan, or `anonymous`. */
  plan: string;
  keyId: string | null;
  apiKey: ApiKeyRecord | null;
  /** `shadow_limited`: a shadowed limit would have refused it; forwarded anyway. */
  rateLimitOutcome: 'allowed' | 'limited' | 'banned' | 'shadow_limited' | 'anonymous' | 'anonymous_limited' | 'store_error' | null;
  /** Set when the limit was decided without the shared store (store.failMode `local` or `open`). */
  storeFallback: FallbackKind | null;
  upstreamStartedAt: bigint | null;
  /** Time to the upstream's response headers, for the log line. */
  upstreamMs: number | null;
  /** The request's SERVER span; null when tracing is off. */
  span: GatewayRequestSpan | null;
  /** The Error code the chain answered with itself, for the span. */
  refusedWith: ErrorCode | null;
}

/** Why a step answered the request itself: the contract's Error code and message, and headers of its own. */
interface Refusal {
  code: ErrorCode;
  message: string;
  headers?: Record<string, string>;
}

/** Request headers that never reach the inventory: credentials, hop-by-hop, and our own internals. */
const STRIPPED_REQUEST_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'connection',
  // The gateway meets (100-continue) or ignores every expectation itself; the inventory sees none.
  'expect',
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
]);
const INTERNAL_HEADER_PREFIX = 'x-gateway-';

/** What a shadowed plan or key asks of the limiter: refusals that lead to no ban. */
const SHADOW: ConsumeOptions = { shadow: true };

const BEARER = /^Bearer +([^\s]+) *$/i;

/** RFC 9110 §11.6.1: every 401 names the scheme and realm; RFC 6750 §3 says why a token was refused. */
const REALM = 'Bearer realm="animal-store"';
function bearerChallenge(error: 'invalid_token' | 'invalid_request', description: string): string {
  return `${REALM}, error="${error}", error_description="${description}"`;
}

/**
 * The public listener's request path on node:http: request id, the API's base path, deprecation
 * notice, auth, limits and ban, route, sunset, forward. Each step is a plain function over Node's
 * request and response that either lets the request on (null) or says how to refuse it.
 */
export function createGatewayHandler(deps: GatewayDependencies): RequestListener {
  const { config, metrics, logger, clock } = deps;
  const addresses = new ClientAddressResolver(config.server.trustedProxies);
  const deprecations = buildDeprecations(config.deprecations);
  const planLimitsByName = new Map<string, WindowLimits>();
  const shadowedPlans = new Set<string>();
  for (const [name, plan] of Object.entries(config.plans)) {
    if (plan.perMinute !== undefined && plan.perDay !== undefined) {
      planLimitsByName.set(name, { perMinute: plan.perMinute, perDay: plan.perDay });
    }
    if (plan.shadow === true) shadowedPlans.add(name);
  }
  const random = deps.random ?? Math.random;
  const jitterSeconds = config.rateLimit.retryAfterJitterSeconds;
  /** Retry-After of a 429: the true wait plus the configured jitter; X-RateLimit-Reset stays the true reset. */
  const retryAfter = (waitMs: number) => jitteredRetryAfterSeconds(waitMs, jitterSeconds, random);
  const publicBase = config.server.publicBaseUrl ? new URL(config.server.publicBaseUrl) : null;
  const forwardedProto = publicBase ? publicBase.protocol.slice(0, -1) : 'http';
  const cors = config.cors.allowedOrigins.length > 0 ? createCorsPolicy(config.cors) : null;
  // Chosen once: with tracing off every hook below is one null check.
  const traces = tracing();

  return function handleRequest(req, res) {
    const state = startRequest(req, res);
    const served = state.span ? state.span.run(() => serve(req, res, state)) : serve(req, res, state);
    served.catch((err: unknown) => failInternally(res, state, err));
  };

  /** The chain, top to bottom: the first step that refuses answers; a request nobody refuses is forwarded. */
  async function serve(req: IncomingMessage, res: ServerResponse, state: RequestState): Promise<void> {
    if (answerPreflight(req, res, state)) return;
    const refusal =
      requireApiPath(state) ??
      announceDeprecation(req, res, state) ??
      (await authenticate(req, res, state)) ??
      // GET /v1/usage is the gateway's own answer and costs no unit; everything else is limited, routed, forwarded.
      (state.route?.answeredByGateway
        ? await answerUsage(req, res, state)
        : ((await limitRate(res, state)) ?? routeRequest(req, state) ?? applyDeprecation(req, state)));
    if (refusal === ANSWERED) return;
    if (refusal) {
      state.refusedWith = refusal.code;
      return sendError(res, refusal.code, refusal.message, refusal.headers);
    }
    await forward(req, res, state);
  }

  /** Step 1: every response carries a request id; per-request state starts here. */
  function startRequest(req: IncomingMessage, res: ServerResponse): RequestState {
    const requestId = requestIdFor(req.headers['x-request-id']);
    res.setHeader('X-Request-Id', requestId);
    if (cors) {
      const corsHeaders = cors.responseHeaders(req.headers.origin);
      if (corsHeaders) setHeaders(res, corsHeaders);
    }
    const target = parseTarget(req.url ?? '/');
    const state: RequestState = {
      requestId,
      startedAt: process.hrtime.bigint(),
      clientAddress: addresses.resolve(req.socket.remoteAddress, req.headers['x-forwarded-for']),
      path: target?.path ?? null,
      originForm: target?.originForm ?? '/',
      route: null,
      plan: 'anonymous',
      keyId: null,
      apiKey: null,
      deprecation: null,
      rateLimitOutcome: null,
      storeFallback: null,
      upstreamStartedAt: null,
      upstreamMs: null,
      span: traces ? traces.startGatewayRequest(req) : null,
      refusedWith: null,
    };
    // 'close', not 'finish': a request cut off before its answer was complete (the client left, or
    // its body outlasted server.requestTimeoutMs) is recorded too, under its route and request id.
    res.once('close', () => {
      recordFinished(req, res, state);
      if (state.span?.recording) endSpan(res, state);
    });
    return state;
  }

  /**
   * A browser's CORS preflight from a listed origin, for a path of the API: answered here with 204,
   * without a key and without counting against any limit (CONTRACT §3). Anything else goes on.
   */
  function answerPreflight(req: IncomingMessage, res: ServerResponse, state: RequestState): boolean {
    if (!cors || req.method !== 'OPTIONS' || req.headers['access-control-request-method'] === undefined) return false;
    if (state.path === null || !(state.path === BASE_PATH || state.path.startsWith(`${BASE_PATH}/`))) return false;
    state.route = matchRoute(state.path);
    const headers = cors.preflightHeaders(req.headers.origin, state.route ? allowHeader(state.route) : 'GET, HEAD, POST');
    if (!headers) return false;
    setHeaders(res, headers);
    res.statusCode = 204;
    res.end();
    return true;
  }

  /** Only the versioned API is served on the public listener. */
  function requireApiPath(state: RequestState): Refusal | null {
    if (state.path === null) return { code: 'invalid_parameter', message: 'The request target is not a valid URL.' };
    if (state.path === BASE_PATH || state.path.startsWith(`${BASE_PATH}/`)) return null;
    return { code: 'not_found', message: 'No such resource. The API lives under /v1.' };
  }

  /**
   * Which operation, learned early so that a deprecated one says so on every response, 401 and
   * 429 included (CONTRACT §3). Unknown paths and methods are refused later, once counted.
   */
  function announceDeprecation(req: IncomingMessage, res: ServerResponse, state: RequestState): null {
    state.route = matchRoute(state.path!);
    state.deprecation = (state.route && deprecations.get(deprecationKey(req.method!, state.route.relativeTemplate))) ?? null;
    if (state.deprecation) setHeaders(res, state.deprecation.headers);
    return null;
  }

  /**
   * Step 2: who is calling. A known key that may no longer be used (revoked, expired) gets its own 401 every
   * time, so its holder learns why; requests without a key, or with one we do not know, count
   * against their address's anonymous limit first (CONTRACT §4).
   */
  async function authenticate(req: IncomingMessage, res: ServerResponse, state: RequestState): Promise<Refusal | null> {
    const header = req.headers.authorization;
    let failure: Refusal & { reason: string };
    let neverIssuedKey = false;
    if (header === undefined || header === '') {
      failure = { code: 'missing_api_key', reason: 'missing', message: 'Send your API key as "Authorization: Bearer <key>".', headers: { 'WWW-Authenticate': REALM } };
    } else if (hasRepeatedAuthorization(req.rawHeaders)) {
      // Node keeps the first of several; which one a client meant is anyone's guess, so none counts.
      const message = 'Send exactly one Authorization header.';
      failure = { code: 'invalid_api_key', reason: 'invalid', message, headers: { 'WWW-Authenticate': bearerChallenge('invalid_request', message) } };
    } else {
      const presented = BEARER.exec(header)?.[1];
      let resolution: KeyResolution = { status: 'invalid' };
      if (presented) {
        const lookup = state.span?.step('key lookup');
        try {
          resolution = await deps.keys.resolve(presented);
        } catch (err) {
          lookup?.end(undefined, 'store_error');
          return storeFailed(err, state);
        }
        lookup?.end({ 'asg.key.status': resolution.status });
      }
      if (resolution.status === 'valid') {
        state.keyId = resolution.record.id;
        state.plan = resolution.record.plan;
        state.apiKey = resolution.record;
        return null;
      }
      if (resolution.status === 'revoked' || resolution.status === 'expired') {
        const revoked = resolution.status === 'revoked';
        const message = revoked ? 'This API key has been revoked.' : 'This API key has expired.';
        metrics.authFailures.inc({ reason: resolution.status });
        state.rateLimitOutcome = 'anonymous';
        const code = revoked ? 'revoked_api_key' : 'expired_api_key';
        return (await showAnonymousWindow(res, state)) ?? { code, message, headers: { 'WWW-Authenticate': bearerChallenge('invalid_token', message) } };
      }
      neverIssuedKey = resolution.neverIssued === true;
      const message = 'The API key is not valid for this environment.';
      // Another scheme (Basic, a bare key) sent no bearer token: the challenge alone says what to send (RFC 6750 §3).
      const challenge = presented ? bearerChallenge('invalid_token', message) : REALM;
      failure = { code: 'invalid_api_key', reason: 'invalid', message, headers: { 'WWW-Authenticate': challenge } };
    }
    metrics.authFailures.inc({ reason: failure.reason });
    let decision;
    const limiting = state.span?.step('rate limit');
    try {
      decision = await deps.addressLimiter.consume(state.clientAddress, { neverIssuedKey });
    } catch (err) {
      limiting?.end(undefined, 'store_error');
      return storeFailed(err, state);
    }
    limiting?.end({ 'asg.rate_limit.scope': 'address', 'asg.rate_limit.decision': decision.allowed ? 'allowed' : 'limited' });
    if (decision.fallback) state.storeFallback = decision.fallback;
    setHeaders(res, anonymousRateLimitHeaders(decision.window, clock.now()));
    if (!decision.allowed) {
      state.rateLimitOutcome = 'anonymous_limited';
      metrics.rejections.inc({ plan: 'anonymous', window: 'anonymous' });
      return {
        code: 'rate_limited',
        message: 'Too many requests without a valid API key from this address.',
        headers: { 'Retry-After': retryAfter(decision.retryAfterMs) },
      };
    }
    state.rateLimitOutcome = 'anonymous';
    return { code: failure.code, message: failure.message, headers: failure.headers };
  }

  /** The address's anonymous window as headers, without counting this request against it. */
  async function showAnonymousWindow(res: ServerResponse, state: RequestState): Promise<Refusal | null> {
    try {
      const window = await deps.addressLimiter.peek(state.clientAddress);
      setHeaders(res, anonymousRateLimitHeaders(window, clock.now()));
      return null;
    } catch (err) {
      return storeFailed(err, state);
    }
  }

  function storeFailed(err: unknown, state: RequestState): Refusal {
    metrics.storeErrors.inc();
    state.rateLimitOutcome = 'store_error';
    logger.error({ err, requestId: state.requestId }, 'store unavailable');
    return { code: 'service_unavailable', message: 'The gateway cannot reach its store right now. Retry shortly.', headers: { 'Retry-After': '1' } };
  }

  /** The limits that apply to the calling key: its own, else its plan's. */
  function limitsOf(record: ApiKeyRecord): WindowLimits {
    const limits = record.limits ?? planLimitsByName.get(record.plan);
    if (!limits) throw new Error(`key ${record.id} has plan ${record.plan} without limits`);
    return limits;
  }

  /** Step 3: the ban and both windows, decided together in one store round trip. */
  async function limitRate(res: ServerResponse, state: RequestState): Promise<Refusal | null> {
    const record = state.apiKey!;
    const limits = limitsOf(record);
    // A key's own limits may shadow (or enforce) whatever its plan does.
    const shadow = record.limits?.shadow ?? shadowedPlans.has(record.plan);
    let decision;
    const limiting = state.span?.step('rate limit');
    try {
      decision = await deps.keyLimiter.consume(record.id, limits, shadow ? SHADOW : undefined);
    } catch (err) {
      limiting?.end(undefined, 'store_error');
      return storeFailed(err, state);
    }
    limiting?.end({ 'asg.rate_limit.scope': 'key', 'asg.rate_limit.decision': decision.outcome, 'asg.plan': record.plan });
    if (decision.fallback) {
      state.storeFallback = decision.fallback;
      if (decision.fallback === 'open') metrics.unenforced.inc({ plan: record.plan });
    }
    if (shadow && decision.outcome !== 'allowed') return admitShadowed(res, state, limits, decision);
    if (decision.outcome === 'banned') {
      state.rateLimitOutcome = 'banned';
      setHeaders(res, bannedRateLimitHeaders(limits, decision.bannedUntil, decision.now));
      metrics.rejections.inc({ plan: record.plan, window: 'ban' });
      return {
        code: 'temporarily_banned',
        message: 'This API key is temporarily banned for retrying after 429 responses. Use exponential backoff.',
        headers: { 'Retry-After': retryAfter(decision.bannedUntil - decision.now) },
      };
    }
    if (decision.outcome === 'limited') {
      state.rateLimitOutcome = 'limited';
      setHeaders(res, keyRateLimitHeaders(decision.minute, decision.day, decision.now, decision.refusedBy));
      metrics.rejections.inc({ plan: record.plan, window: decision.refusedBy });
      if (decision.bannedNow) metrics.keyBans.inc({ plan: record.plan });
      return {
        code: 'rate_limited',
        message: `The ${decision.refusedBy} limit of this API key is used up.`,
        headers: { 'Retry-After': retryAfter(decision.retryAfterMs) },
      };
    }
    state.rateLimitOutcome = 'allowed';
    countNearLimit(record.plan, 'minute', decision.minute);
    countNearLimit(record.plan, 'day', decision.day);
    setHeaders(res, keyRateLimitHeaders(decision.minute, decision.day, decision.now));
    return null;
  }

  /**
   * Shadow mode (CONTRACT §4): what a limit would have refused is forwarded, with the headers it
   * would have carried, no Retry-After and no ban; it is logged and counted so that an operator can
   * see what the limit would do before enforcing it.
   */
  function admitShadowed(res: ServerResponse, state: RequestState, limits: WindowLimits, decision: Exclude<KeyDecision, { outcome: 'allowed' }>): null {
    const window = decision.outcome === 'banned' ? 'ban' : decision.refusedBy;
    state.rateLimitOutcome = 'shadow_limited';
    metrics.shadowDenied.inc({ plan: state.plan, window });
    logger.info({ requestId: state.requestId, plan: state.plan, keyId: state.keyId, window }, 'shadow limit would have refused; forwarded');
    if (decision.outcome === 'banned') setHeaders(res, bannedRateLimitHeaders(limits, decision.bannedUntil, decision.now));
    else setHeaders(res, keyRateLimitHeaders(decision.minute, decision.day, decision.now, decision.refusedBy));
    return null;
  }

  /**
   * GET /v1/usage (CONTRACT §3): the caller's plan, both windows, ban and expiry, read without
   * consuming a unit (as GitHub's GET /rate_limit). Other methods get 405, also for free.
   */
  async function answerUsage(req: IncomingMessage, res: ServerResponse, state: RequestState): Promise<Refusal | typeof ANSWERED> {
    const route = state.route!;
    if (!route.allowedMethods.includes(req.method!)) {
      return { code: 'method_not_allowed', message: `${req.method} is not allowed here.`, headers: { Allow: allowHeader(route) } };
    }
    const record = state.apiKey!;
    const limits = limitsOf(record);
    let usage;
    try {
      usage = await deps.keyLimiter.usage(record.id, limits);
    } catch (err) {
      return storeFailed(err, state);
    }
    const now = clock.now();
    state.rateLimitOutcome = 'allowed';
    if (usage.bannedUntil !== null) setHeaders(res, bannedRateLimitHeaders(limits, usage.bannedUntil, now));
    else setHeaders(res, keyRateLimitHeaders(usage.minute, usage.day, now));
    const window = (name: 'minute' | 'day', w: WindowState) => ({ name, limit: w.limit, remaining: w.remaining, reset: Math.ceil(w.resetAt / 1000) });
    const body = JSON.stringify({
      plan: record.plan,
      windows: [window('minute', usage.minute), window('day', usage.day)],
      bannedUntil: usage.bannedUntil === null ? null : new Date(usage.bannedUntil).toISOString(),
      expiresAt: record.expiresAt,
    });
    res.statusCode = 200;
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('Content-Length', Buffer.byteLength(body));
    res.setHeader('Cache-Control', 'no-store');
    res.end(req.method === 'HEAD' ? undefined : body);
    return ANSWERED;
  }

  /** Counts the one admitted request per window that takes a key past 80 % of it. */
  function countNearLimit(plan: string, window: 'minute' | 'day', windowState: WindowState): void {
    if (windowState.limit - windowState.remaining === Math.ceil(windowState.limit * NEAR_LIMIT_SHARE)) metrics.nearLimit.inc({ plan, window });
  }

  /** Step 4: unknown paths and methods end here, still counted and limited. */
  function routeRequest(req: IncomingMessage, state: RequestState): Refusal | null {
    const route = state.route;
    if (!route) return { code: 'not_found', message: 'No such resource.' };
    if (!route.allowedMethods.includes(req.method!)) {
      return { code: 'method_not_allowed', message: `${req.method} is not allowed here.`, headers: { Allow: allowHeader(route) } };
    }
    return null;
  }

  /** Step 5: deprecated operations (headers already set) are gone after their sunset. */
  function applyDeprecation(req: IncomingMessage, state: RequestState): Refusal | null {
    const notice = state.deprecation;
    if (!notice) return null;
    const route = state.route!;
    metrics.deprecatedRequests.inc({ route: route.template, plan: state.plan });
    deps.deprecationUsage?.record(deprecatedRouteId(req.method!, route.template), state.keyId!);
    if (clock.now() >= notice.sunsetAt) return { code: 'gone', message: 'This operation has passed its sunset date. Use the successor version.' };
    return null;
  }

  /** Step 6: sign, rewrite headers, and stream to the inventory with the body bounded. */
  async function forward(req: IncomingMessage, res: ServerResponse, state: RequestState): Promise<void> {
    const declaredLength = Number(req.headers['content-length'] ?? 0);
    if (declaredLength > config.server.maxBodyBytes) {
      res.setHeader('Connection', 'close');
      return sendError(res, 'payload_too_large', `The request body is larger than ${config.server.maxBodyBytes} bytes.`);
    }
    const token = await deps.signer.sign({ keyId: state.keyId!, plan: state.plan });
    const streamed = req.headers['transfer-encoding'] !== undefined;
    // The forwarders send req.url and req.headers as they find them.
    req.headers = upstreamHeaders(req.headers, state, token);
    req.url = state.originForm;
    // The inventory's traceparent names the forward span (with tracing off the client's passes untouched).
    const forwarding = state.span?.step('forward');
    if (forwarding) state.span!.propagate(req.headers, forwarding);

    state.upstreamStartedAt = process.hrtime.bigint();
    const abandon = deps.forwarder.forward(req, res, {
      onResponse: (statusCode) => {
        forwarding?.end({ 'http.response.status_code': statusCode });
        observeUpstream(req, state, statusCode);
      },
      onFailure: (failure) => {
        forwarding?.end(undefined, failure.reason);
        metrics.upstreamErrors.inc({ reason: failure.reason });
        logger.warn({ requestId: state.requestId, reason: failure.reason }, 'upstream failure');
        sendError(res, failure.code, failure.message);
      },
    });
    if (streamed) boundStreamedBody(req, res, abandon);
  }

  /** A chunked body has no declared length: count it as it streams and stop at the limit. */
  function boundStreamedBody(req: IncomingMessage, res: ServerResponse, abandon: () => void): void {
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

  /** The client's headers minus credentials, hop-by-hop and internal ones, plus the gateway's own. */
  function upstreamHeaders(incoming: IncomingHttpHeaders, state: RequestState, token: string): IncomingHttpHeaders {
    const connectionListed = typeof incoming.connection === 'string' ? incoming.connection.toLowerCase().split(',').map((name) => name.trim()) : [];
    const headers: IncomingHttpHeaders = {};
    for (const name in incoming) {
      if (STRIPPED_REQUEST_HEADERS.has(name) || name.startsWith(INTERNAL_HEADER_PREFIX) || connectionListed.includes(name)) continue;
      headers[name] = incoming[name];
    }
    headers[UPSTREAM_TOKEN_HEADER] = token;
    headers['x-request-id'] = state.requestId;
    headers['x-forwarded-for'] = state.clientAddress;
    headers['x-forwarded-proto'] = forwardedProto;
    headers['x-forwarded-host'] = publicBase ? publicBase.host : (incoming.host ?? 'localhost');
    return headers;
  }

  function observeUpstream(req: IncomingMessage, state: RequestState, statusCode: number): void {
    if (state.upstreamStartedAt === null) return;
    const seconds = Number(process.hrtime.bigint() - state.upstreamStartedAt) / 1e9;
    state.upstreamMs = Math.round(seconds * 1e6) / 1e3;
    metrics.upstreamDuration.observe({ method: req.method!, route: state.route?.template ?? UNMATCHED_ROUTE, status_code: String(statusCode) }, seconds);
  }

  function recordFinished(req: IncomingMessage, res: ServerResponse, state: RequestState): void {
    const route = state.route?.template ?? UNMATCHED_ROUTE;
    const answered = res.writableFinished;
    // Cut off before an answer started: no status reached the client (0, as for unparsed requests).
    const status = answered || res.headersSent ? res.statusCode : 0;
    const statusCode = String(status);
    const seconds = Number(process.hrtime.bigint() - state.startedAt) / 1e9;
    metrics.httpRequests.inc({ method: req.method!, route, status_code: statusCode, plan: state.plan });
    metrics.httpDuration.observe({ method: req.method!, route, status_code: statusCode }, seconds);
    const outcome = state.keyId !== null && state.rateLimitOutcome !== null ? USAGE_OUTCOMES[state.rateLimitOutcome as keyof typeof USAGE_OUTCOMES] : undefined;
    if (outcome) deps.keyActivity?.record(state.keyId!, outcome);
    logger.info(
      {
        requestId: state.requestId,
        method: req.method,
        route,
        status: status === 0 ? null : status,
        ...(answered ? undefined : { cutOff: cutOffReason(res) ?? 'client closed the connection' }),
        durationMs: Math.round(seconds * 1e6) / 1e3,
        upstreamMs: state.upstreamMs,
        plan: state.plan,
        keyId: state.keyId,
        clientAddress: state.clientAddress,
        rateLimit: state.rateLimitOutcome,
        storeFallback: state.storeFallback ?? undefined,
        ...state.span?.logFields(),
      },
      'request',
    );
  }

  function endSpan(res: ServerResponse, state: RequestState): void {
    state.span!.end({
      statusCode: res.statusCode,
      route: state.route?.template ?? UNMATCHED_ROUTE,
      plan: state.plan,
      clientAddress: state.clientAddress,
      rateLimit: state.rateLimitOutcome,
      refusal: state.refusedWith,
    });
  }

  /** A bug, never a client's doing: logged in full, answered as the contract's 500 without details. */
  function failInternally(res: ServerResponse, state: RequestState, err: unknown): void {
    logger.error({ err, requestId: state.requestId }, 'unhandled gateway error');
    sendError(res, 'internal_error', 'An internal error occurred.');
  }
}

/**
 * The path the gateway routes on and the target the inventory gets, in origin form
 * (`/v1/pets?limit=1`), whatever form the client used: an absolute-form target
 * (`GET http://host/v1/pets`, RFC 9112 §3.2.2) is read with the WHATWG URL parser. The path ends
 * at the query or a fragment (which a client should not send, but which names no resource either).
 * The asterisk form (`OPTIONS *`) is a path of its own that no route has. Null for a target that is
 * no URL at all (`GET http://[::1/v1/pets`).
 */
export function parseTarget(target: string): { path: string; originForm: string } | null {
  if (target.startsWith('/') || target === '*') {
    const pathEnd = target.search(/[?#]/);
    return { path: pathEnd === -1 ? target : target.slice(0, pathEnd), originForm: target };
  }
  try {
    const url = new URL(target);
    return { path: url.pathname, originForm: url.pathname + url.search };
  } catch {
    return null;
  }
}

function hasRepeatedAuthorization(rawHeaders: string[]): boolean {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization' && ++seen > 1) return true;
  }
  return false;
}

/** A step that wrote the whole response itself: nothing more to send. */
const ANSWERED = Symbol('answered');

function setHeaders(res: ServerResponse, headers: Record<string, string>): void {
  for (const name in headers) res.setHeader(name, headers[name]!);
}
