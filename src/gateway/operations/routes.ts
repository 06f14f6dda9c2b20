/** The public API's routes, as templates under the base path. The one place the gateway learns its API. */

export interface RouteMatch {
  /** Route template with the base path, e.g. `/v1/pets/{petId}`: the only form a metric label takes. */
  template: string;
  /** Template under the base path, as `deprecations[].path` names it. */
  relativeTemplate: string;
  /** Methods this route answers; HEAD goes with GET as HTTP says. */
  allowedMethods: readonly string[];
  /**
   * Answered by the gateway itself, never forwarded to the inventory, and never stopped by the
   * key's access policy: which of its own answers (steps/answer-usage.ts, steps/revoke-own-key.ts).
   */
  answeredByGateway?: 'usage' | 'revoke';
}

const petsCollection: RouteMatch = {
  template: '/v1/pets',
  relativeTemplate: '/pets',
  allowedMethods: ['GET', 'HEAD', 'POST'],
};
const petItem: RouteMatch = {
  template: '/v1/pets/{petId}',
  relativeTemplate: '/pets/{petId}',
  allowedMethods: ['GET', 'HEAD'],
};

/** The caller's own limits and their use (CONTRACT §3), answered by the gateway without consuming a unit. */
export const usageRoute: RouteMatch = {
  template: '/v1/usage',
  relativeTemplate: '/usage',
  allowedMethods: ['GET', 'HEAD'],
  answeredByGateway: 'usage',
};

/**
 * The caller's key revokes itself (CONTRACT §4): whoever holds a leaked key can kill it. Answered
 * by the gateway; no access policy, limit or ban of the key stops it.
 */
export const revokeRoute: RouteMatch = {
  template: '/v1/keys/revoke',
  relativeTemplate: '/keys/revoke',
  allowedMethods: ['POST'],
  answeredByGateway: 'revoke',
};

/** Every route's template: the values the `route` label of a metric takes besides `unmatched`. */
export const ROUTE_TEMPLATES: readonly string[] = [petsCollection, petItem, usageRoute, revokeRoute].map(
  (route) => route.template,
);

/**
 * Matches a request path (no query string) to a route. Any segment counts as a `petId` here; the
 * inventory decides whether it is a valid identifier and answers 400 if not.
 */
export function matchRoute(pathname: string): RouteMatch | null {
  if (pathname === '/v1/pets' || pathname === '/v1/pets/') return petsCollection;
  if (pathname === '/v1/usage') return usageRoute;
  if (pathname === '/v1/keys/revoke') return revokeRoute;
  if (pathname.startsWith('/v1/pets/')) {
    const rest = pathname.slice('/v1/pets/'.length);
    if (rest.length > 0 && !rest.includes('/')) return petItem;
  }
  return null;
}

export function allowHeader(route: RouteMatch): string {
  return route.allowedMethods.join(', ');
}
