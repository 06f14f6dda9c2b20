import type { ServerResponse } from 'node:http';
import { codeToStatus, errorBodyWith, sendError } from '../../shared/errors';
import type { UpstreamTokenSigner } from '../../shared/http/upstream-token';
import { keyOf, type GatewayRequest } from '../request-context';
import { Refusal } from '../refusals';
import { ANSWERED, setHeaders, type StepOutcome } from '../step-outcome';
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
 * Asked NGINX-style, the answer is one `auth_request` passes on quietly: 401 or 403, with the
 * refusal's own status in X-Authz-Status and its Error body in X-Authz-Error as well, for the
 * error page that answers the client (docs/external-auth.md); the headers and body are the same.
 */
export function answerRefusal(res: ServerResponse, refusal: Refusal, nginxStyle: boolean): void {
  if (!nginxStyle) {
    sendError(res, refusal.code, refusal.message, refusal);
    return;
  }
  const status = refusal.status ?? codeToStatus[refusal.code];
  const body = JSON.stringify(errorBodyWith(refusal.code, refusal.message, status, refusal.fields));
  if (refusal.headers) setHeaders(res, refusal.headers);
  res.setHeader(DECISION_HEADERS.errorStatus, String(status));
  res.setHeader(DECISION_HEADERS.errorBody, asciiOnly(body));
  res.statusCode = status === 401 ? 401 : 403;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

/** JSON with every character past ASCII escaped (still the same JSON): a header value carries no other. */
function asciiOnly(json: string): string {
  return json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
