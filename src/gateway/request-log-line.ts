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

/** The request's protocol as ALPN names it. */
export function protocolOf(httpVersion: string): string {
  return httpVersion === '2.0' ? 'h2' : `http/${httpVersion}`;
}

/** The request's one log line: what an operator greps for, never a key (only its id). */
export function requestLogLine(request: RequestContext, finished: FinishedRequest): Record<string, unknown> {
  return {
    requestId: request.requestId,
    method: finished.method,
    route: finished.route,
    protocol: finished.protocol,
    status: finished.status,
    ...(finished.cutOff === undefined ? undefined : { cutOff: finished.cutOff }),
    durationMs: finished.durationMs,
    upstreamMs: request.upstreamMs,
    plan: request.plan,
    keyId: request.keyId,
    clientAddress: request.clientAddress,
    rateLimit: request.rateLimitOutcome,
    ...(request.refusedByWindow ? { window: request.refusedByWindow } : undefined),
    storeFallback: request.storeFallback ?? undefined,
    ...request.span?.logFields(),
  };
}
