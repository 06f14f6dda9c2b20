import type { Logger } from '../../shared/logger';
import type { GatewayStep, SpanAttributes } from '../../shared/telemetry/telemetry';
import type { GatewayMetrics } from '../../shared/metrics/metrics';
import type { RequestContext } from '../request-context';
import { STORE_UNAVAILABLE, type Refusal } from '../refusals';

/** A call to the shared store (key lookup, a limiter) that may fail: traced, and a failure answered 503. */
export type StoreCall = <T>(
  request: RequestContext,
  spanName: GatewayStep,
  call: () => Promise<T>,
  describe: (value: T) => SpanAttributes,
) => Promise<T | Refusal>;

/**
 * Every store call of the request path goes through here, so a store that does not answer is
 * counted, logged and answered the same way wherever it happens, and each call is a child span
 * when the request is traced.
 */
export function createStoreCall(deps: { metrics: GatewayMetrics; logger: Logger }): StoreCall {
  const failed = (err: unknown, request: RequestContext): Refusal => {
    deps.metrics.storeErrors.inc();
    request.rateLimitOutcome = 'store_error';
    deps.logger.error({ err, requestId: request.requestId }, 'store unavailable');
    return STORE_UNAVAILABLE;
  };
  return async (request, spanName, call, describe) => {
    const span = request.span?.step(spanName);
    try {
      const value = await call();
      span?.end(describe(value));
      return value;
    } catch (err) {
      span?.end(undefined, 'store_error');
      return failed(err, request);
    }
  };
}
