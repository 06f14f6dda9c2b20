import type { ApiKeyRecord } from '../../keys/types';
import { keyOf, type GatewayRequest } from '../request-context';
import { NO_SUCH_RESOURCE, Refusal } from '../refusals';
import { ANSWERED, CONTINUE, type StepOutcome } from '../step-outcome';
import type { StoreCall } from './store-failure';

/**
 * What the step needs to revoke the caller's key: the key service's revocation, its audit entry
 * (`by: "holder"`) and its `key.revoked` webhook, put together by src/product (the request path
 * never reaches into the admin API).
 */
export interface OwnKeyRevocation {
  revokeOwn(record: ApiKeyRecord, caller: { requestId: string; clientAddress: string }): Promise<void>;
}

export interface RevokeOwnKeyDependencies {
  /** Absent (a gateway built without one, as some tests build it): the route answers 404. */
  revocation?: OwnKeyRevocation;
  storeCall: StoreCall;
}

/**
 * POST /v1/keys/revoke (CONTRACT §4): the key in `Authorization` is revoked, 204. It runs after
 * the caller's key is known and before its limits: a key with an access policy that does not list
 * this operation, a key out of units or banned can still be revoked, and a revocation costs no unit.
 * A key already revoked or expired never gets here (its own 401). Nothing of the body is read.
 */
export function createRevokeOwnKeyStep(deps: RevokeOwnKeyDependencies) {
  const { storeCall } = deps;
  const describe = () => ({ 'asg.key.status': 'revoked' });

  // Another method goes on, and is counted and answered 405 (with Allow) by the route check, as on any route.
  return function revokeOwnKey(request: GatewayRequest): StepOutcome | Promise<StepOutcome> {
    return request.route?.answeredByGateway === 'revoke' && request.method === 'POST' ? answer(request) : CONTINUE;
  };

  async function answer(request: GatewayRequest): Promise<StepOutcome> {
    const { res, req } = request;
    const revocation = deps.revocation;
    if (!revocation) return NO_SUCH_RESOURCE;
    const record = keyOf(request);
    const done = await storeCall(
      request,
      'key lookup',
      () => revocation.revokeOwn(record, { requestId: request.requestId, clientAddress: request.clientAddress }),
      describe,
    );
    if (done instanceof Refusal) return done;
    // A body the client sent anyway is drained, so the connection can be kept.
    req.resume();
    res.statusCode = 204;
    res.setHeader('Cache-Control', 'no-store');
    res.end();
    return ANSWERED;
  }
}
