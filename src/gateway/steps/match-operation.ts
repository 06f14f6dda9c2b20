import type { ServerResponse } from 'node:http';
import { deprecatedOperationId } from '../../shared/public-api';
import type { DeprecationNotice } from '../operations/deprecation';
import type { RequestContext } from '../request-context';
import { isApiPath } from '../request-target';
import { matchRoute } from '../operations/routes';
import { CONTINUE, Refusal, setHeaders, type StepOutcome } from '../step-outcome';

const NOT_A_URL = new Refusal('invalid_parameter', 'The request target is not a valid URL.');
const OUTSIDE_API = new Refusal('not_found', 'No such resource. The API lives under /v1.');

/**
 * Which operation the request names, learned before anything else so that a deprecated one says
 * so on every response, 401 and 429 included (CONTRACT §3). Only the versioned API is served here;
 * unknown paths and methods under it are refused later, once counted (check-route).
 */
export function createOperationStep(deprecations: ReadonlyMap<string, DeprecationNotice>) {
  return function matchOperation(method: string, res: ServerResponse, request: RequestContext): StepOutcome {
    if (request.path === null) return NOT_A_URL;
    if (!isApiPath(request.path)) return OUTSIDE_API;
    const route = (request.route = matchRoute(request.path));
    if (route && deprecations.size > 0) {
      request.deprecation = deprecations.get(deprecatedOperationId(method, route.template)) ?? null;
      if (request.deprecation) setHeaders(res, request.deprecation.headers);
    }
    return CONTINUE;
  };
}
