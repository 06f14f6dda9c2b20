import { BASE_PATH, OPERATIONS, type PublicOperation } from '../../shared/public-api';

/** The public API's routes: the operation table (src/shared/public-api.ts) grouped by route template. */

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

/** The one route template clients also reach with a trailing slash (`/v1/pets/`), as they always could. */
const ALSO_WITH_SLASH = '/pets';

function routeOf(path: string, rows: readonly PublicOperation[]): RouteMatch {
  const answeredByGateway = rows.find((row) => row.answeredByGateway)?.answeredByGateway;
  return {
    template: BASE_PATH + path,
    relativeTemplate: path,
    allowedMethods: rows.flatMap((row) => (row.method === 'GET' ? ['GET', 'HEAD'] : [row.method])),
    ...(answeredByGateway ? { answeredByGateway } : {}),
  };
}

/** Route templates under the base path → their route, in the table's order. */
const ROUTES: ReadonlyMap<string, RouteMatch> = (() => {
  const rowsByPath = new Map<string, PublicOperation[]>();
  for (const row of OPERATIONS) rowsByPath.set(row.path, [...(rowsByPath.get(row.path) ?? []), row]);
  return new Map([...rowsByPath].map(([path, rows]) => [path, routeOf(path, rows)]));
})();

/** Whole request paths of routes without a parameter → route. */
const LITERAL = new Map<string, RouteMatch>();
/** Routes whose last segment is a parameter (`/pets/{petId}`): the path before it → route. */
const PARAMETER_LAST: Array<{ prefix: string; route: RouteMatch }> = [];
for (const [path, route] of ROUTES) {
  const parameter = path.indexOf('{');
  if (parameter === -1) {
    LITERAL.set(route.template, route);
    if (path === ALSO_WITH_SLASH) LITERAL.set(`${route.template}/`, route);
  } else if (path.lastIndexOf('/') === parameter - 1 && path.endsWith('}')) {
    PARAMETER_LAST.push({ prefix: BASE_PATH + path.slice(0, parameter), route });
  } else {
    throw new Error(`route ${path}: a parameter may only be the last segment`);
  }
}

/** The route `/v1/usage` (GET /v1/usage, answered by the gateway without consuming a unit). */
export const usageRoute: RouteMatch = ROUTES.get('/usage')!;

/** The route `/v1/keys/revoke` (the caller's key revokes itself; no policy, limit or ban stops it). */
export const revokeRoute: RouteMatch = ROUTES.get('/keys/revoke')!;

/** Every route's template: the values the `route` label of a metric takes besides `unmatched`. */
export const ROUTE_TEMPLATES: readonly string[] = [...ROUTES.values()].map((route) => route.template);

/**
 * Matches a request path (no query string) to a route: one Map lookup, else a prefix per
 * parameterised route. Any segment counts as a `petId` here; the inventory decides whether it is a
 * valid identifier and answers 400 if not.
 */
export function matchRoute(pathname: string): RouteMatch | null {
  const literal = LITERAL.get(pathname);
  if (literal) return literal;
  for (const { prefix, route } of PARAMETER_LAST) {
    if (pathname.length > prefix.length && pathname.startsWith(prefix) && !pathname.includes('/', prefix.length))
      return route;
  }
  return null;
}

export function allowHeader(route: RouteMatch): string {
  return route.allowedMethods.join(', ');
}
