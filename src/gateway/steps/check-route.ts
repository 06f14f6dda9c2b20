import type { RequestContext } from '../request-context';
import { allowHeader, type RouteMatch } from '../operations/routes';
import { CONTINUE, Refusal, type StepOutcome } from '../step-outcome';

const NO_SUCH_RESOURCE = new Refusal('not_found', 'No such resource.');

/** 405 with `Allow` for a method the route does not answer. */
export function methodNotAllowed(method: string, route: RouteMatch): Refusal {
  return new Refusal('method_not_allowed', `${method} is not allowed here.`, { Allow: allowHeader(route) });
}

/** Unknown paths and methods under the API end here, after they were counted and limited like any request. */
export function checkRoute(method: string, request: RequestContext): StepOutcome {
  const route = request.route;
  if (!route) return NO_SUCH_RESOURCE;
  if (!route.allowedMethods.includes(method)) return methodNotAllowed(method, route);
  return CONTINUE;
}
