import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { rawErrorResponse } from '../errors';
import type { Logger } from '../logger';
import { requestIdFor } from '../request-id';
import { UNMATCHED_ROUTE } from '../public-api';
import type { GatewayMetrics } from '../metrics/metrics';

/** What node:http hands a `clientError` listener: its parser's code, or a socket error. */
type ClientError = Error & { code?: string };

/** The socket as node:http leaves it: the response in flight on it, if any. */
type HttpSocket = Socket & { _httpMessage?: ServerResponse | null };

export interface UnparsableRequestHooks {
  /** The public listener counts these in gateway_http_requests_total; the admin listener does not. */
  metrics?: Pick<GatewayMetrics, 'httpRequests'>;
  logger: Logger;
  /**
   * Set when the listener's request handler records every request it started, cut off or not (the
   * gateway's does, on the response's `close`): a request cut off after its headers arrived is then
   * left to it, under its route and request id, with this told the reason.
   */
  cutOff?: (res: ServerResponse, reason: string) => void;
}

/**
 * The server's `clientError` listener. node:http's own answer to a request its parser refuses is a
 * bodiless 400 or 431 without X-Request-Id; the contract wants the Error body on every answer, so
 * this writes one in its place, with the same rule node follows for when an answer may be written
 * at all: the socket is writable and no response has started on it. A request that took too long
 * to arrive (headersTimeout, requestTimeout) is closed without an answer, as nginx does: the
 * client is slow or gone, and the connection is what we want back.
 */
export function answerUnparsableRequest(hooks: UnparsableRequestHooks) {
  return (err: ClientError, socket: HttpSocket): void => {
    const parserError = err.code?.startsWith('HPE_') === true;
    const timedOut = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    if (!parserError && !timedOut) {
      // ECONNRESET and the like: the client is gone; there is no one to answer.
      socket.destroy();
      return;
    }
    const inFlight = socket._httpMessage;
    if (timedOut && inFlight && hooks.cutOff) {
      hooks.cutOff(inFlight, err.code!);
      socket.destroy();
      return;
    }
    // Read before the socket is closed: a destroyed socket no longer knows its peer.
    const clientAddress = socket.remoteAddress ?? null;
    const requestId = requestIdFor(undefined);
    const canAnswer = parserError && socket.writable && !socket._httpMessage?.headersSent;
    const answer =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? ({
            status: 431,
            code: 'headers_too_large',
            message: 'The request headers are too large or too many.',
          } as const)
        : ({ status: 400, code: 'malformed_request', message: 'The request is not valid HTTP/1.1.' } as const);
    if (canAnswer) socket.end(rawErrorResponse(answer.code, answer.message, { 'X-Request-Id': requestId }));
    else socket.destroy();
    const status = canAnswer ? answer.status : 0;
    hooks.metrics?.httpRequests.inc({
      method: 'unparsed',
      route: UNMATCHED_ROUTE,
      status_code: String(status),
      plan: 'anonymous',
    });
    hooks.logger.info(
      { requestId, status: canAnswer ? answer.status : null, reason: err.code, clientAddress },
      timedOut ? 'request timed out before it arrived' : 'request refused by the HTTP parser',
    );
  };
}
