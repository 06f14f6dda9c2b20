/**
 * What the gateway, the inventory and the admin API spell alike about the public API: its base
 * path, the label of a path that matches no route, and its operations, once.
 */

/** The public API's versioned base path. */
export const BASE_PATH = '/v1';

/** Label for every path that matches no route, so unmatched paths never widen metric cardinality. */
export const UNMATCHED_ROUTE = 'unmatched';

/** One operation of the public API: a row of the operation table. */
export interface PublicOperation {
  /** openapi.yaml's `operationId`, as an access policy's `allowedOperations` lists it. */
  readonly id: string;
  readonly method: 'GET' | 'POST';
  /** Route template under the base path, as config `costs` and `deprecations` name it: `/pets/{petId}`. */
  readonly path: string;
  /** Units a request takes of every window of its key unless config `costs` gives it another. */
  readonly defaultCost: number;
  /**
   * Answered by the gateway itself, never forwarded to the inventory, and never stopped by an access
   * policy (which therefore cannot list it): which of its own answers.
   */
  readonly answeredByGateway?: 'usage' | 'revoke';
}

/**
 * The operation table (CONTRACT §3, §4; openapi.yaml): the one place the gateway learns its API.
 * The route matcher, the operation costs, the deprecations and the access policies all read it;
 * config `costs` and `deprecations` name its rows by method and path, and a row deprecated there
 * carries that deprecation. HEAD is GET without a body: the same operation, with GET's row.
 * test/unit/shared/public-api.test.ts holds it against openapi.yaml.
 */
export const OPERATIONS = [
  { id: 'listPets', method: 'GET', path: '/pets', defaultCost: 1 },
  { id: 'createPet', method: 'POST', path: '/pets', defaultCost: 1 },
  { id: 'getPet', method: 'GET', path: '/pets/{petId}', defaultCost: 1 },
  // The caller's own limits and their use (CONTRACT §3), without consuming a unit.
  { id: 'getUsage', method: 'GET', path: '/usage', defaultCost: 1, answeredByGateway: 'usage' },
  // The caller's key revokes itself (CONTRACT §4): whoever holds a leaked key can kill it.
  { id: 'revokeKey', method: 'POST', path: '/keys/revoke', defaultCost: 1, answeredByGateway: 'revoke' },
] as const satisfies readonly PublicOperation[];

export type OperationRow = (typeof OPERATIONS)[number];

/** The row a request of `method` to the route `path` (under the base path) names; HEAD names GET's. */
export function operationAt(method: string, path: string): OperationRow | undefined {
  const wanted = method === 'HEAD' ? 'GET' : method;
  return OPERATIONS.find((operation) => operation.method === wanted && operation.path === path);
}

/** Every row as config names one, `GET /pets`: what an unknown cost or deprecation is told it may name. */
export function operationNames(): string {
  return OPERATIONS.map((operation) => `${operation.method} ${operation.path}`).join(', ');
}

/**
 * One id per deprecated operation, `GET /v1/pets/{petId}` (the route template with the base path):
 * the key of the lookup, and what calls are recorded and reported under (kept as it was: the
 * recorded calls are stored by it). HEAD shares GET's: it is the same operation without a body.
 */
export function deprecatedOperationId(method: string, template: string): string {
  return `${method === 'HEAD' ? 'GET' : method} ${template}`;
}
