/**
 * The operation ids of openapi.yaml an access policy may list (CONTRACT §4), and which id a request
 * names. `getUsage` and `revokeKey` are not among them: GET /v1/usage and POST /v1/keys/revoke are
 * always allowed (a policy must never keep a leaked key from being revoked), so listing them would
 * mean nothing. test/unit/access/operation-ids.test.ts checks these against openapi.yaml.
 */
export const POLICY_OPERATION_IDS = ['listPets', 'createPet', 'getPet'] as const;
export type PolicyOperationId = (typeof POLICY_OPERATION_IDS)[number];

/** Route template → method → operation id. HEAD is GET without a body: the same operation. */
const OPERATIONS: ReadonlyMap<string, ReadonlyMap<string, PolicyOperationId>> = new Map([
  [
    '/v1/pets',
    new Map<string, PolicyOperationId>([
      ['GET', 'listPets'],
      ['HEAD', 'listPets'],
      ['POST', 'createPet'],
    ]),
  ],
  [
    '/v1/pets/{petId}',
    new Map<string, PolicyOperationId>([
      ['GET', 'getPet'],
      ['HEAD', 'getPet'],
    ]),
  ],
]);

/**
 * The operation a request names, from its method and matched route template; null when it names
 * none a policy can list (an unknown path or method, answered 404/405 later, or GET /v1/usage).
 * Two Map lookups, no allocation: it runs on every request of a key with an operation list.
 */
export function operationIdOf(method: string, routeTemplate: string | undefined): PolicyOperationId | null {
  if (routeTemplate === undefined) return null;
  return OPERATIONS.get(routeTemplate)?.get(method) ?? null;
}

const KNOWN: ReadonlySet<string> = new Set(POLICY_OPERATION_IDS);

export function isPolicyOperationId(value: string): value is PolicyOperationId {
  return KNOWN.has(value);
}
