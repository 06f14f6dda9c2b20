import type { GatewayRequest } from '../request-context';
import { HOST_NOT_AUTHORITY, NO_TUNNEL } from '../refusals';
import { CONTINUE, type StepOutcome } from '../step-outcome';

/**
 * What HTTP/2 hands over that HTTP/1.1's parser never would (CONTRACT §2, issue 42), refused with
 * the contract's Error body before anything else looks at the request: CONNECT (over HTTP/1.1
 * Node closes such a connection; over HTTP/2 it answered a bare 405 of its own) and a `host`
 * that names another entity than `:authority`, which RFC 9113 §8.3.1 makes a malformed request.
 * HTTP/1.x requests pass untouched.
 */
export function checkFraming(request: GatewayRequest): StepOutcome {
  const { req, method } = request;
  if (req.httpVersionMajor !== 2) return CONTINUE;
  if (method === 'CONNECT') return NO_TUNNEL;
  const host = req.headers.host;
  const authority = req.headers[':authority'];
  if (host !== undefined && typeof authority === 'string' && String(host).toLowerCase() !== authority.toLowerCase())
    return HOST_NOT_AUTHORITY;
  return CONTINUE;
}
