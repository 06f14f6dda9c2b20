import type { ServerResponse } from 'node:http';
import { errorBody, sendError } from '../../shared/errors';
import type { UpstreamTokenSigner } from '../../shared/upstream-token';
import { keyOf, type GatewayRequest } from '../request-context';
import { Refusal } from '../refusals';
import { ANSWERED, type StepOutcome } from '../step-outcome';
import { DECISION_HEADERS } from './decision-headers';

/**
 * The decision listener's last step, where the public listener forwards: the request is allowed.
 * 200 with no body, the caller named for the proxy to pass upstream (key id, consumer, plan) and
 * the token the inventory requires, signed as forward.ts signs it; the rate-limit and deprecation
 * headers the earlier steps set are on the answer already, for the proxy to copy to the client.
 */
export function createAllowStep(deps: { signer: UpstreamTokenSigner }) {
  return async function allow(request: GatewayRequest): Promise<StepOutcome> {
    const record = keyOf(request);
    const token = await deps.signer.sign({ keyId: record.id, plan: request.plan });
    const { res } = request;
    res.setHeader(DECISION_HEADERS.keyId, record.id);
    res.setHeader(DECISION_HEADERS.consumerId, record.consumerId ?? '');
    res.setHeader(DECISION_HEADERS.plan, request.plan);
    res.setHeader(DECISION_HEADERS.token, token);
    res.statusCode = 200;
    res.setHeader('Content-Length', '0');
    res.end();
    return ANSWERED;
  };
}

/**
 * A refusal, answered as the public listener answers it: the same status, Error body and headers.
 * Asked NGINX-style, the Error body also travels in X-Authz-Error, since `auth_request` drops the
 * body of the answer it reads (docs/external-auth.md: its error page sends this one).
 */
export function answerRefusal(res: ServerResponse, refusal: Refusal, bodyInHeader: boolean): void {
  if (bodyInHeader) {
    const body = errorBody(refusal.code, refusal.message, refusal.status);
    res.setHeader(DECISION_HEADERS.errorBody, asciiJson(body));
  }
  sendError(res, refusal.code, refusal.message, refusal);
}

/** JSON with every character past ASCII escaped (still the same JSON): a header value carries no other. */
function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
