import type { Clock } from '../../shared/clock';
import type { GatewayMetrics } from '../../shared/metrics/metrics';
import { keyOf, type GatewayRequest } from '../request-context';
import { PAST_SUNSET } from '../refusals';
import { CONTINUE, type StepOutcome } from '../step-outcome';

export interface SunsetDependencies {
  metrics: GatewayMetrics;
  clock: Clock;
  /** Remembers which keys call deprecated operations (GET /admin/deprecations); off the request path. */
  deprecationUsage?: { record(operationId: string, keyId: string): void };
}

/** A deprecated operation (its headers already set) is counted with its caller, and gone after its sunset. */
export function createSunsetStep(deps: SunsetDependencies) {
  return function applySunset(request: GatewayRequest): StepOutcome {
    const notice = request.deprecation;
    if (!notice) return CONTINUE;
    deps.metrics.deprecatedRequests.inc({ route: notice.template, plan: request.plan });
    deps.deprecationUsage?.record(notice.id, keyOf(request).id);
    return deps.clock.now() >= notice.sunsetAt ? PAST_SUNSET : CONTINUE;
  };
}
