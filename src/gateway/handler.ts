import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { tracing } from '../shared/telemetry/telemetry';
import { sendError } from '../shared/errors';
import type { Logger } from '../shared/logger';
import { requestIdFor } from '../shared/request-id';
import { ClientAddressResolver } from './client-address';
import type { CorsPolicy } from './cors';
import { newGatewayRequest, type GatewayRequest } from './request-context';
import { parseTarget } from './request-target';
import { Refusal } from './refusals';
import { CONTINUE, setHeaders, type StepOutcome } from './step-outcome';
import { createSteps, type GatewayDependencies, type KeyDecisionListener, type KeyLookup } from './steps';

export type { GatewayDependencies, KeyDecisionListener, KeyLookup };

type Steps = ReturnType<typeof createSteps>;

/**
 * The public listener's request path on node:http. `serve` reads as the sequence: HTTP/2 framing,
 * CORS preflight, which operation, who is calling, the anonymous limit, the access policy, the usage
 * answer, a key revoking itself, the key's limit, the route, the sunset, then forward; the request
 * is recorded when its response closes. Each step is a module of its own under ./steps, built once here from what it needs: it takes the request as it
 * stands (a GatewayRequest) and answers one StepOutcome: CONTINUE, ANSWERED or a Refusal.
 */
export function createGatewayHandler(deps: GatewayDependencies): RequestListener {
  const steps = createSteps(deps);
  const startRequest = createRequestStart(deps, steps);
  const serve = createSequence(steps);
  const { logger } = deps;

  return function handleRequest(req, res) {
    const request = startRequest(req, res);
    if (request.span) request.span.run(() => serveAndAnswer(request));
    else void serveAndAnswer(request);
  };

  /** The sequence and its answer; a bug anywhere in it is answered 500 (never rejects). */
  async function serveAndAnswer(request: GatewayRequest): Promise<void> {
    try {
      answer(request, await serve(request));
    } catch (err) {
      failInternally(logger, request, err);
    }
  }
}

/**
 * A step's outcome as it is, or the step's promise awaited: a step that decides without waiting
 * (most of them, most of the time) costs the sequence no promise and no turn of the microtask queue.
 */
function isPending(outcome: StepOutcome | Promise<StepOutcome>): outcome is Promise<StepOutcome> {
  return outcome instanceof Promise;
}

/** The sequence, top to bottom: the first step that does not CONTINUE answers the request. */
function createSequence(steps: Steps): (request: GatewayRequest) => Promise<StepOutcome> {
  const { checkFraming, answerPreflight, matchOperation, authenticate, limitAnonymous, checkAccess } = steps;
  const { answerUsage, revokeOwnKey, limitKey, checkRoute, applySunset, forward } = steps;
  return async function serve(request: GatewayRequest): Promise<StepOutcome> {
    let step: StepOutcome | Promise<StepOutcome>;
    // What HTTP/2 hands over that HTTP/1.1's parser never would (CONNECT, a host other than :authority) goes no further.
    let outcome = checkFraming(request);
    if (outcome === CONTINUE) outcome = answerPreflight(request);
    if (outcome === CONTINUE) outcome = matchOperation(request);
    if (outcome === CONTINUE) outcome = isPending((step = authenticate(request))) ? await step : step;
    // A caller without a usable key ends here, with its 401 or 429.
    if (outcome === CONTINUE) outcome = isPending((step = limitAnonymous(request))) ? await step : step;
    // A key's (and its consumer's) access policy, from the cached record: a 403 spends nothing.
    if (outcome === CONTINUE) outcome = checkAccess(request);
    // GET /v1/usage is the gateway's own answer and costs no unit of any window.
    if (outcome === CONTINUE) outcome = isPending((step = answerUsage(request))) ? await step : step;
    // POST /v1/keys/revoke: the caller's key revokes itself, before (and so whatever) its limits and ban.
    if (outcome === CONTINUE) outcome = isPending((step = revokeOwnKey(request))) ? await step : step;
    if (outcome === CONTINUE) outcome = isPending((step = limitKey(request))) ? await step : step;
    if (outcome === CONTINUE) outcome = checkRoute(request);
    if (outcome === CONTINUE) outcome = applySunset(request);
    if (outcome === CONTINUE) outcome = isPending((step = forward(request))) ? await step : step;
    return outcome;
  };
}

/** What a request's response holds for its record on 'close' (one shared listener, no closure per request). */
const RECORD = Symbol('gateway request');
type RecordedResponse = ServerResponse & { [RECORD]?: GatewayRequest };

/** Every request starts here: its id on every response, CORS headers, and its record on close. */
function createRequestStart(
  deps: GatewayDependencies,
  steps: { cors: CorsPolicy | null; recordRequest: (request: GatewayRequest) => void },
): (req: IncomingMessage, res: ServerResponse) => GatewayRequest {
  const { cors, recordRequest } = steps;
  const addresses = new ClientAddressResolver(deps.config.server.trustedProxies);
  // Chosen once: with tracing off every hook is one null check.
  const traces = tracing();
  function recordOnClose(this: RecordedResponse): void {
    const request = this[RECORD];
    if (request !== undefined) recordRequest(request);
  }
  return function startRequest(req, res) {
    const requestId = requestIdFor(req.headers['x-request-id']);
    res.setHeader('X-Request-Id', requestId);
    if (cors) {
      const corsHeaders = cors.responseHeaders(req.headers.origin);
      if (corsHeaders) setHeaders(res, corsHeaders);
    }
    const target = parseTarget(req.url ?? '/');
    const request = newGatewayRequest(req, res, {
      requestId,
      clientAddress: addresses.resolve(req.socket.remoteAddress, req.headers['x-forwarded-for']),
      path: target?.path ?? null,
      originForm: target?.originForm ?? '/',
      span: traces ? traces.startGatewayRequest(req) : null,
    });
    (res as RecordedResponse)[RECORD] = request;
    // 'close' comes once: `on` rather than `once`, which wraps the listener anew for every response.
    res.on('close', recordOnClose);
    return request;
  };
}

/** The sequence's outcome: a refusal becomes the contract's Error body; ANSWERED has been written already. */
function answer(request: GatewayRequest, outcome: StepOutcome): void {
  if (!(outcome instanceof Refusal)) return;
  request.refusedWith = outcome.code;
  sendError(request.res, outcome.code, outcome.message, outcome);
}

/** A bug, never a client's doing: logged in full, answered as the contract's 500 without details. */
function failInternally(logger: Logger, request: GatewayRequest, err: unknown): void {
  logger.error({ err, requestId: request.requestId }, 'unhandled gateway error');
  sendError(request.res, 'internal_error', 'An internal error occurred.');
}
