import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { tracing } from '../shared/telemetry';
import { sendError } from '../shared/errors';
import { requestIdFor } from '../shared/request-id';
import { ClientAddressResolver } from './client-address';
import { newRequestContext, type RequestContext } from './request-context';
import { parseTarget } from './request-target';
import { CONTINUE, Refusal, setHeaders, type StepOutcome } from './step-outcome';
import { createSteps, type GatewayDependencies, type KeyLookup } from './steps';
import { checkFraming } from './steps/check-framing';

export type { GatewayDependencies, KeyLookup };

/**
 * The public listener's request path on node:http. `serve` reads as the sequence: CORS preflight,
 * which operation, who is calling, their limit, the route, the sunset, then forward; the request
 * is recorded when its response closes. Each step is a module of its own under ./steps, built
 * once here from what it needs, and answers with one StepOutcome: CONTINUE, ANSWERED or a Refusal.
 */
export function createGatewayHandler(deps: GatewayDependencies): RequestListener {
  const { logger } = deps;
  const addresses = new ClientAddressResolver(deps.config.server.trustedProxies);
  // Chosen once: with tracing off every hook is one null check.
  const traces = tracing();
  const { cors, answerPreflight, matchOperation, authenticate, limitAnonymous, answerUsage, limitKey, checkRoute, applySunset, forward, recordRequest } = createSteps(deps);

  return function handleRequest(req, res) {
    const request = startRequest(req, res);
    const served = request.span ? request.span.run(() => serve(req, res, request)) : serve(req, res, request);
    served.catch((err: unknown) => failInternally(res, request, err));
  };

  /** The sequence, top to bottom (HTTP/2 framing, CORS preflight, operation, caller, limit, route, sunset, forward): the first step that does not CONTINUE answers the request. */
  async function serve(req: IncomingMessage, res: ServerResponse, request: RequestContext): Promise<void> {
    const method = req.method!;
    let outcome: StepOutcome = checkFraming(req);
    if (outcome === CONTINUE) outcome = answerPreflight(req, res, request);
    if (outcome === CONTINUE) outcome = matchOperation(method, res, request);
    if (outcome !== CONTINUE) return answer(res, request, outcome);

    const caller = await authenticate(req, request);
    if (caller instanceof Refusal) return answer(res, request, caller);
    if (caller.kind !== 'key') return answer(res, request, await limitAnonymous(res, request, caller));
    // GET /v1/usage is the gateway's own answer and costs no unit of any window.
    if (request.route?.answeredByGateway) return answer(res, request, await answerUsage(req, res, request, request.route, caller.record));

    outcome = await limitKey(res, request, caller.record, req.method);
    if (outcome === CONTINUE) outcome = checkRoute(method, request);
    if (outcome === CONTINUE) outcome = applySunset(request, caller.record.id);
    if (outcome !== CONTINUE) return answer(res, request, outcome);
    await forward(req, res, request, caller.record.id);
  }

  /** Every request starts here: its id on every response, CORS headers, and its record on close. */
  function startRequest(req: IncomingMessage, res: ServerResponse): RequestContext {
    const requestId = requestIdFor(req.headers['x-request-id']);
    res.setHeader('X-Request-Id', requestId);
    if (cors) {
      const corsHeaders = cors.responseHeaders(req.headers.origin);
      if (corsHeaders) setHeaders(res, corsHeaders);
    }
    const target = parseTarget(req.url ?? '/');
    const request = newRequestContext({
      requestId,
      clientAddress: addresses.resolve(req.socket.remoteAddress, req.headers['x-forwarded-for']),
      path: target?.path ?? null,
      originForm: target?.originForm ?? '/',
      span: traces ? traces.startGatewayRequest(req) : null,
    });
    res.once('close', () => recordRequest(req, res, request));
    return request;
  }

  /** A step answered: a refusal becomes the contract's Error body; ANSWERED has been written already. */
  function answer(res: ServerResponse, request: RequestContext, outcome: StepOutcome): void {
    if (!(outcome instanceof Refusal)) return;
    request.refusedWith = outcome.code;
    sendError(res, outcome.code, outcome.message, outcome.headers);
  }

  /** A bug, never a client's doing: logged in full, answered as the contract's 500 without details. */
  function failInternally(res: ServerResponse, request: RequestContext, err: unknown): void {
    logger.error({ err, requestId: request.requestId }, 'unhandled gateway error');
    sendError(res, 'internal_error', 'An internal error occurred.');
  }
}
