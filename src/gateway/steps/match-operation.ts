import { deprecatedOperationId } from '../../shared/public-api';
import type { DeprecationNotice } from '../operations/deprecation';
import { matchRoute } from '../operations/routes';
import type { GatewayRequest } from '../request-context';
import { isApiPath } from '../request-target';
import { NOT_A_URL, OUTSIDE_API } from '../refusals';
import { CONTINUE, setHeaders, type StepOutcome } from '../step-outcome';

/**
 * Which operation the request names, learned before anything else so that a deprecated one says
 * so on every response, 401 and 429 included (CONTRACT §3). Only the versioned API is served here;
 * unknown paths and methods under it are refused later, once counted (check-route).
 */
export function createOperationStep(deprecations: ReadonlyMap<string, DeprecationNotice>) {
  return function matchOperation(request: GatewayRequest): StepOutcome {
    if (request.path === null) return NOT_A_URL;
    if (!isApiPath(request.path)) return OUTSIDE_API;
    const route = (request.route = matchRoute(request.path));
    if (route && deprecations.size > 0) {
      request.deprecation = deprecations.get(deprecatedOperationId(request.method, route.template)) ?? null;
      if (request.deprecation) setHeaders(request.res, request.deprecation.headers);
    }
    return CONTINUE;
  };
}
