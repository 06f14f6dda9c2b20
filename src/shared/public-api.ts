/**
 * What the gateway, the inventory and the admin API spell alike about the public API: its base
 * path, the label of a path that matches no route, and the one id of an operation.
 */

/** The public API's versioned base path. */
export const BASE_PATH = '/v1';

/** Label for every path that matches no route, so unmatched paths never widen metric cardinality. */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * One id per deprecated operation, `GET /v1/pets/{petId}` (the route template with the base path):
 * the key of the lookup, and what calls are recorded and reported under. HEAD shares GET's: it is
 * the same operation without a body.
 */
export function deprecatedOperationId(method: string, template: string): string {
  return `${method === 'HEAD' ? 'GET' : method} ${template}`;
}
