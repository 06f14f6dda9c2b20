import { accessDenial, accessPolicyOf, OPEN_ACCESS, type AccessDenial } from '../../access/access-policy';
import type { ConsumerAccessPolicy } from '../../access/consumer-policy';
import { operationIdOf } from '../../access/operation-ids';
import type { Logger } from '../../shared/logger';
import type { GatewayMetrics } from '../../shared/metrics/metrics';
import type { GatewayRequest } from '../request-context';
import { ADDRESS_NOT_ALLOWED, OPERATION_NOT_ALLOWED, type Refusal } from '../refusals';
import { CONTINUE, type StepOutcome } from '../step-outcome';

/** A key's consumer's policy (src/access/consumer-policy.ts): consumers (issue 38) plug in here. */
export type { ConsumerAccessPolicy };

export interface AccessStepDependencies {
  metrics: GatewayMetrics;
  logger: Logger;
  consumerPolicy?: ConsumerAccessPolicy;
}

const REFUSALS: Record<AccessDenial, Refusal> = {
  operation: OPERATION_NOT_ALLOWED,
  address: ADDRESS_NOT_ALLOWED,
};

/**
 * A key's access policy, and its consumer's (CONTRACT §4): right after the caller is known and
 * before any limit, so a request outside the policy is refused with 403 from the cached record,
 * with no store command, no unit of any window, no rate-limit headers, and is never forwarded.
 * GET /v1/usage is always allowed. The client address is the one the limits use (trusted proxies
 * resolved by src/gateway/client-address.ts). A key without lists, of a consumer without, costs
 * two property reads.
 */
export function createAccessStep(deps: AccessStepDependencies) {
  const { metrics, logger } = deps;
  const consumerPolicy = deps.consumerPolicy ?? (() => null);

  return function checkAccess(request: GatewayRequest): StepOutcome {
    const record = request.key;
    // Keyless callers were answered by the anonymous limit; the gateway's own answers (usage, a key
    // revoking itself) are always allowed: a policy must never keep a leaked key from being killed.
    if (record === null || request.route?.answeredByGateway) return CONTINUE;
    const keyPolicy = accessPolicyOf(record);
    const consumer = consumerPolicy(record);
    if (keyPolicy === OPEN_ACCESS && (consumer === null || consumer === OPEN_ACCESS)) return CONTINUE;
    const operationId = operationIdOf(request.method, request.route?.template);
    const denial = accessDenial({ operationId, clientAddress: request.clientAddress }, keyPolicy, consumer);
    if (denial === null) return CONTINUE;
    metrics.accessDenied.inc({ reason: denial, plan: request.plan });
    logger.info(
      {
        requestId: request.requestId,
        keyId: record.id,
        reason: denial,
        operationId,
        clientAddress: request.clientAddress,
      },
      'request refused by access policy',
    );
    return REFUSALS[denial];
  };
}
