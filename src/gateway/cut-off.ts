import type { ServerResponse } from 'node:http';

/**
 * Why node:http cut a request off mid-flight (its `clientError` code, e.g. ERR_HTTP_REQUEST_TIMEOUT
 * for a body that took longer than server.requestTimeoutMs), for the request's own log line: the
 * listener that learns the reason and the handler that writes the line are apart. Set only on a
 * cut-off, so an ordinary request costs nothing here.
 */
const reasons = new WeakMap<ServerResponse, string>();

export function markCutOff(res: ServerResponse, reason: string): void {
  reasons.set(res, reason);
}

export function cutOffReason(res: ServerResponse): string | undefined {
  return reasons.get(res);
}
