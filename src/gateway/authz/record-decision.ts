import { flatLineLogger } from '../../shared/logger';
import { UNMATCHED_ROUTE } from '../../shared/public-api';
import type { GatewayRequest } from '../request-context';
import { protocolOf, requestLogLine } from '../request-log-line';
import { USAGE_OUTCOMES, type RecordDependencies } from '../steps/record-request';
import { DECISION_HEADERS } from './decision-headers';

/**
 * A decision once answered: counted apart from the requests the gateway served
 * (gateway_authz_decisions_total, gateway_authz_decision_duration_seconds, the original method and
 * route), the key's usage as the public listener counts it, and one log line. The limiter's, the
 * access policy's and the deprecations' own metrics were counted by the shared steps.
 */
export function createDecisionRecord(deps: RecordDependencies) {
  const { metrics } = deps;
  // The line is flat and names no credential: written without pino's redaction walk.
  const logger = flatLineLogger(deps.logger);

  return function recordDecision(request: GatewayRequest): void {
    const { req, res } = request;
    const route = request.route?.template ?? UNMATCHED_ROUTE;
    const method = request.method;
    const answered = res.writableFinished;
    // Asked NGINX-style, a refusal went out as 401 or 403 naming its own status: counted under its own.
    const decided = Number(res.getHeader(DECISION_HEADERS.errorStatus) ?? res.statusCode);
    const status = answered || res.headersSent ? decided : 0;
    const statusCode = String(status);
    const seconds = Number(process.hrtime.bigint() - request.startedAt) / 1e9;
    metrics.decisionCounts.add([method, route, statusCode, request.plan]);
    metrics.decisionDurations.observe([method, route, statusCode], seconds);
    const { keyId, rateLimitOutcome } = request;
    if (keyId !== null && rateLimitOutcome !== null) {
      const usage = USAGE_OUTCOMES[rateLimitOutcome];
      if (usage) deps.keyActivity?.record(keyId, usage);
    }
    const line = requestLogLine(request, {
      method,
      route,
      status: status === 0 ? null : status,
      cutOff: answered ? undefined : 'client closed the connection',
      durationMs: Math.round(seconds * 1e6) / 1e3,
      protocol: protocolOf(req.httpVersion),
    });
    logger.info(line, 'authz decision');
  };
}
