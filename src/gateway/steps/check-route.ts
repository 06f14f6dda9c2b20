import type { GatewayRequest } from '../request-context';
import { methodNotAllowed, NO_SUCH_RESOURCE } from '../refusals';
import { CONTINUE, type StepOutcome } from '../step-outcome';

/** Unknown paths and methods under the API end here, after they were counted and limited like any request. */
export function checkRoute(request: GatewayRequest): StepOutcome {
  const route = request.route;
  if (!route) return NO_SUCH_RESOURCE;
  if (!route.allowedMethods.includes(request.method)) return methodNotAllowed(request.method, route);
  return CONTINUE;
}
