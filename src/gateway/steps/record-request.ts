import { flatLineLogger, type Logger } from '../../shared/logger';
import { answeredInFull, clientLeftReason, cutOffReason } from '../cut-off';
import type { GatewayMetrics } from '../../shared/metrics/metrics';
import type { GatewayRequest, RateLimitOutcome } from '../request-context';
import { protocolOf, requestLogLine } from '../request-log-line';
import { UNMATCHED_ROUTE } from '../../shared/public-api';

/**
 * The limiter's outcomes that a key's usage history (and its top-keys tally) counts. A request over
 * a shadowed limit was forwarded, so it counts as admitted; gateway_ratelimit_shadow_denied_total
 * says it would not have been. Every 429 the key's limits answered is rate-limited: a window used
 * up (rate_limited) and maxInFlight reached (concurrency_limited) alike (issue 48).
 */
export const USAGE_OUTCOMES: Partial<Record<RateLimitOutcome, 'admitted' | 'rateLimited' | 'banned'>> = {
  allowed: 'admitted',
  shadow_limited: 'admitted',
  limited: 'rateLimited',
  concurrency_limited: 'rateLimited',
  banned: 'banned',
};

export interface RecordDependencies {
  metrics: GatewayMetrics;
  logger: Logger;
  /** Counts each key's admitted, rate-limited and banned requests and its last use; off the request path. */
  keyActivity?: { record(keyId: string, outcome: 'admitted' | 'rateLimited' | 'banned'): void };
}

/**
 * Once a request is over, answered or cut off: its metrics, the key's usage, its log line and
 * its span. Runs on the response's 'close', so a request cut off before its answer was complete
 * (the client left, or its body outlasted server.requestTimeoutMs) is recorded too, under its
 * route and request id.
 */
export function createRecordStep(deps: RecordDependencies) {
  const { metrics } = deps;
  // The request line is flat and names no credential: written without pino's redaction walk.
  const logger = flatLineLogger(deps.logger);
  // The label values, filled in per request: the tallies read them at once and keep none of the array.
  const countLabels = ['', '', '', ''];
  const durationLabels = ['', '', ''];

  return function recordRequest(request: GatewayRequest): void {
    const { req, res } = request;
    const route = request.route?.template ?? UNMATCHED_ROUTE;
    const method = request.method;
    const answered = answeredInFull(res);
    // Cut off, before its answer or in the middle of it: counted under 0 (as unparsed requests are)
    // and logged with status null, never under the status its head carried (issue 48: cancelled
    // HTTP/2 streams were counted as 200).
    const status = answered ? res.statusCode : 0;
    const statusCode = String(status);
    const seconds = Number(process.hrtime.bigint() - request.startedAt) / 1e9;
    // Plain counts here, handed to prom-client at scrape time (src/shared/metrics/metric-tally.ts).
    countLabels[0] = durationLabels[0] = method;
    countLabels[1] = durationLabels[1] = route;
    countLabels[2] = durationLabels[2] = statusCode;
    countLabels[3] = request.plan;
    metrics.requestCounts.add(countLabels);
    metrics.requestDurations.observe(durationLabels, seconds);
    const { keyId, rateLimitOutcome } = request;
    if (keyId !== null && rateLimitOutcome !== null) {
      const usage = USAGE_OUTCOMES[rateLimitOutcome];
      if (usage) deps.keyActivity?.record(keyId, usage);
    }
    logger.info(
      requestLogLine(request, {
        method,
        route,
        status: status === 0 ? null : status,
        cutOff: answered ? undefined : (cutOffReason(res) ?? clientLeftReason(res)),
        durationMs: Math.round(seconds * 1e6) / 1e3,
        protocol: protocolOf(req.httpVersion),
      }),
      'request',
    );
    const span = request.span;
    if (span?.recording) {
      span.end({
        statusCode: res.statusCode,
        route,
        plan: request.plan,
        clientAddress: request.clientAddress,
        rateLimit: request.rateLimitOutcome,
        refusal: request.refusedWith,
      });
    }
  };
}
