import { BASE_PATH, OPERATIONS, type OperationRow } from '../shared/public-api';

/** A row an access policy may list: every operation but the gateway's own answers. */
type ListableRow = Exclude<OperationRow, { answeredByGateway: string }>;
export type PolicyOperationId = ListableRow['id'];

function isListable(row: OperationRow): row is ListableRow {
  return !('answeredByGateway' in row);
}

/**
 * The operation ids of the operation table (src/shared/public-api.ts) an access policy may list
 * (CONTRACT §4). `getUsage` and `revokeKey` are not among them: GET /v1/usage and POST
 * /v1/keys/revoke are always allowed (a policy must never keep a leaked key from being revoked), so
 * listing them would mean nothing.
 */
export const POLICY_OPERATION_IDS: readonly PolicyOperationId[] = OPERATIONS.filter(isListable).map((row) => row.id);

/** Route template → method → operation id, from the table. HEAD is GET without a body: the same operation. */
const BY_ROUTE: ReadonlyMap<string, ReadonlyMap<string, PolicyOperationId>> = (() => {
  const byRoute = new Map<string, Map<string, PolicyOperationId>>();
  for (const row of OPERATIONS.filter(isListable)) {
    const template = BASE_PATH + row.path;
    let byMethod = byRoute.get(template);
    if (!byMethod) byRoute.set(template, (byMethod = new Map()));
    byMethod.set(row.method, row.id);
    if (row.method === 'GET') byMethod.set('HEAD', row.id);
  }
  return byRoute;
})();

/**
 * The operation a request names, from its method and matched route template; null when it names
 * none a policy can list (an unknown path or method, answered 404/405 later, or GET /v1/usage).
 * Two Map lookups, no allocation: it runs on every request of a key with an operation list.
 */
export function operationIdOf(method: string, routeTemplate: string | undefined): PolicyOperationId | null {
  if (routeTemplate === undefined) return null;
  return BY_ROUTE.get(routeTemplate)?.get(method) ?? null;
}

const KNOWN: ReadonlySet<string> = new Set(POLICY_OPERATION_IDS);

export function isPolicyOperationId(value: string): value is PolicyOperationId {
  return KNOWN.has(value);
}
