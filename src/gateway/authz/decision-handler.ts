import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { sendError } from '../../shared/errors';
import { requestIdFor } from '../../shared/request-id';
import { PlanBook } from '../../limits/plan-limits';
import { ClientAddressResolver } from '../client-address';
import { newGatewayRequest, type GatewayRequest } from '../request-context';
import { parseTarget } from '../request-target';
import { Refusal } from '../refusals';
import { CONTINUE, type StepOutcome } from '../step-outcome';
import { createDecidingSteps, type DecisionDependencies } from '../steps';
import { answerRefusal, createAllowStep } from './answer-decision';
import { originalRequestOf, type OriginalRequest } from './original-request';
import { createDecisionRecord } from './record-decision';

/**
 * The gateway's own answer (GET /v1/usage) is not a request to decide: a proxy that forwarded it on
 * an allow would ask the inventory, which does not serve it. The proxy routes it to the public listener.
 */
const ANSWERED_BY_PUBLIC_LISTENER = new Refusal(
  'not_found',
  'This operation is answered by the gateway itself: the proxy routes it to the public listener (docs/external-auth.md).',
);

/**
 * A request's end is never seen here (the proxy forwards it, or not, after the answer), so no slot
 * under maxInFlight is taken: one would be released as the decision's answer closes, limiting
 * decisions at once rather than requests in progress (CONTRACT §11; the start says so).
 */
class PlansWithoutSlots extends PlanBook {
  override maxInFlightOf(): undefined {
    return undefined;
  }
}

/**
 * The decision listener's request path (CONTRACT §11): the request an edge proxy asks about is
 * decided by the public listener's own steps (src/gateway/steps), in the same order, and answered
 * where the public listener would forward it: 200 with the caller and the signed token, or the
 * refusal the public listener would send. Counted as the public listener counts, the windows and
 * bans on the same store; recorded apart (record-decision.ts).
 */
export function createDecisionHandler(deps: DecisionDependencies): RequestListener {
  const { logger } = deps;
  const addresses = new ClientAddressResolver(deps.config.server.trustedProxies);
  const { matchOperation, authenticate, limitAnonymous, checkAccess, limitKey, checkRoute, applySunset } =
    createDecidingSteps(deps, new PlansWithoutSlots(deps.config.plans));
  const allow = createAllowStep({ signer: deps.signer });
  const recordDecision = createDecisionRecord({ metrics: deps.metrics, logger, keyActivity: deps.keyActivity });

  return function handleDecision(req, res) {
    const original = originalRequestOf(req, addresses.isTrusted(req.socket.remoteAddress));
    const request = startDecision(req, res, original);
    // A refused X-Original-* pair came from a proxy that reads the refusal NGINX-style.
    const nginxStyle = original instanceof Refusal || original.fromHeaders;
    const decided = original instanceof Refusal ? Promise.resolve<StepOutcome>(original) : decide(request);
    decided
      .then((outcome) => answer(request, outcome, nginxStyle))
      .catch((err: unknown) => failInternally(request, err));
  };

  /** The public listener's sequence (handler.ts) from the operation on, ending in the answer instead of the forward. */
  async function decide(request: GatewayRequest): Promise<StepOutcome> {
    let outcome = matchOperation(request);
    if (outcome === CONTINUE && request.route?.answeredByGateway) outcome = ANSWERED_BY_PUBLIC_LISTENER;
    if (outcome === CONTINUE) outcome = await authenticate(request);
    if (outcome === CONTINUE) outcome = await limitAnonymous(request);
    if (outcome === CONTINUE) outcome = checkAccess(request);
    if (outcome === CONTINUE) outcome = await limitKey(request);
    if (outcome === CONTINUE) outcome = checkRoute(request);
    if (outcome === CONTINUE) outcome = applySunset(request);
    if (outcome === CONTINUE) outcome = await allow(request);
    return outcome;
  }

  /** Every decision starts here: its id on the answer, the original request, and its record on close. */
  function startDecision(
    req: IncomingMessage,
    res: ServerResponse,
    original: OriginalRequest | Refusal,
  ): GatewayRequest {
    const requestId = requestIdFor(req.headers['x-request-id']);
    res.setHeader('X-Request-Id', requestId);
    const target = original instanceof Refusal ? null : parseTarget(original.target);
    const request = newGatewayRequest(req, res, {
      requestId,
      method: original instanceof Refusal ? req.method! : original.method,
      clientAddress: addresses.resolve(req.socket.remoteAddress, req.headers['x-forwarded-for']),
      path: target?.path ?? null,
      originForm: target?.originForm ?? '/',
      span: null,
    });
    res.once('close', () => recordDecision(request));
    return request;
  }

  function answer(request: GatewayRequest, outcome: StepOutcome, nginxStyle: boolean): void {
    if (!(outcome instanceof Refusal)) return;
    request.refusedWith = outcome.code;
    answerRefusal(request.res, outcome, nginxStyle);
  }

  /** A bug, never a proxy's doing: logged in full, answered as the contract's 500 without details. */
  function failInternally(request: GatewayRequest, err: unknown): void {
    logger.error({ err, requestId: request.requestId }, 'unhandled authz decision error');
    sendError(request.res, 'internal_error', 'An internal error occurred.');
  }
}
