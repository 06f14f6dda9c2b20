import type { RequestContext } from './request-context';

/** What a request's record knows once it is over. */
export interface FinishedRequest {
  method: string | undefined;
  route: string;
  /** The status the client got; null when it was cut off before an answer started. */
  status: number | null;
  /** Why it was cut off (the client left, or its body outlasted server.requestTimeoutMs); absent when answered. */
  cutOff?: string;
  durationMs: number;
  /** `h2` or `http/1.1` (`http/1.0`): what the client spoke, as ALPN names it. */
  protocol: string;
}

/** The request's protocol as ALPN names it (HTTP/1.1's text made once, not per request). */
export function protocolOf(httpVersion: string): string {
  return httpVersion === '1.1' ? 'http/1.1' : httpVersion === '2.0' ? 'h2' : `http/${httpVersion}`;
}

/**
 * The request's one log line: what an operator greps for, never a key (only its id). One object
 * literal, its fields always in this order: a field left undefined (cutOff when answered, window
 * unless a window refused, storeFallback unless the store failed) is not written (pino skips
 * undefined), as the spreads this replaced left it out; the span's ids follow when tracing is on.
 */
export function requestLogLine(request: RequestContext, finished: FinishedRequest): Record<string, unknown> {
  const line: Record<string, unknown> = {
    requestId: request.requestId,
    method: finished.method,
    route: finished.route,
    protocol: finished.protocol,
    status: finished.status,
    cutOff: finished.cutOff,
    durationMs: finished.durationMs,
    upstreamMs: request.upstreamMs,
    plan: request.plan,
    keyId: request.keyId,
    clientAddress: request.clientAddress,
    rateLimit: request.rateLimitOutcome,
    window: request.refusedByWindow || undefined,
    storeFallback: request.storeFallback ?? undefined,
  };
  const span = request.span;
  if (span) {
    const traceFields = span.logFields();
    for (const name in traceFields) line[name] = traceFields[name as keyof typeof traceFields];
  }
  return line;
}
