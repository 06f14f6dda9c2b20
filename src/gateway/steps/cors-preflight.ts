import type { CorsPolicy } from '../cors';
import type { GatewayRequest } from '../request-context';
import { isApiPath } from '../request-target';
import { allowHeader, matchRoute } from '../operations/routes';
import { ANSWERED, CONTINUE, setHeaders, type StepOutcome } from '../step-outcome';

/**
 * A browser's CORS preflight from a listed origin, for a path of the API: answered here with 204,
 * without a key and without counting against any limit (CONTRACT §3). Anything else goes on.
 */
export function createPreflightStep(cors: CorsPolicy | null) {
  return function answerPreflight(request: GatewayRequest): StepOutcome {
    const { req, res } = request;
    if (!cors || request.method !== 'OPTIONS' || req.headers['access-control-request-method'] === undefined)
      return CONTINUE;
    if (request.path === null || !isApiPath(request.path)) return CONTINUE;
    request.route = matchRoute(request.path);
    const headers = cors.preflightHeaders(
      req.headers.origin,
      request.route ? allowHeader(request.route) : 'GET, HEAD, POST',
    );
    if (!headers) return CONTINUE;
    setHeaders(res, headers);
    res.statusCode = 204;
    res.end();
    return ANSWERED;
  };
}
