import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../../shared/logger';
import { sendError } from '../../shared/errors';
import type { UpstreamTokenSigner } from '../../shared/upstream-token';
import type { Forwarder } from '../upstream/forward-contract';
import type { GatewayMetrics } from '../../shared/metrics';
import type { RequestContext } from '../request-context';
import { UNMATCHED_ROUTE } from '../../shared/public-api';
import { markCutOff } from '../cut-off';
import { upstreamHeaders } from '../upstream/upstream-headers';
import { bodyOfUnknownLength } from '../upstream/request-body';

export interface ForwardDependencies {
  forwarder: Forwarder;
  signer: UpstreamTokenSigner;
  metrics: GatewayMetrics;
  logger: Logger;
  maxBodyBytes: number;
  /** Config `server.publicBaseUrl`: the scheme and host the inventory is told clients used. */
  publicBaseUrl: string | null;
}

/** The last step: sign, rewrite headers, and stream to the inventory with the body bounded. */
export function createForwardStep(deps: ForwardDependencies) {
  const { forwarder, signer, metrics, logger, maxBodyBytes } = deps;
  const publicBase = deps.publicBaseUrl ? new URL(deps.publicBaseUrl) : null;
  const forwardedProto = publicBase ? publicBase.protocol.slice(0, -1) : 'http';
  const forwardedHost = publicBase ? publicBase.host : null;
  const tooLarge = `The request body is larger than ${maxBodyBytes} bytes.`;

  return async function forward(req: IncomingMessage, res: ServerResponse, request: RequestContext, keyId: string): Promise<void> {
    const declaredLength = Number(req.headers['content-length'] ?? 0);
    if (declaredLength > maxBodyBytes) {
      closeAfterAnswer(req, res);
      return sendError(res, 'payload_too_large', tooLarge);
    }
    const token = await signer.sign({ keyId, plan: request.plan });
    // Read before the headers are rewritten for the inventory.
    const streamed = bodyOfUnknownLength(req);
    // The forwarders send req.url and req.headers as they find them.
    // An own property: Http2ServerRequest's `headers` is a getter on its prototype, which assignment cannot replace.
    Object.defineProperty(req, 'headers', {
      value: upstreamHeaders(req.headers, { token, requestId: request.requestId, clientAddress: request.clientAddress, forwardedProto, forwardedHost }),
      writable: true,
      configurable: true,
      enumerable: true,
    });
    req.url = request.originForm;
    // The inventory's traceparent names the forward span (with tracing off the client's passes untouched).
    const span = request.span;
    const forwarding = span?.step('forward');
    if (span && forwarding) span.propagate(req.headers, forwarding);

    request.upstreamStartedAt = process.hrtime.bigint();
    const abandon = forwarder.forward(req, res, {
      // The upstream deadline counts from the request's arrival, the wait for a connection included.
      receivedAt: request.startedAt,
      onResponse: (statusCode) => {
        forwarding?.end({ 'http.response.status_code': statusCode });
        observeUpstream(req.method!, request, statusCode);
      },
      onFailure: (failure) => {
        forwarding?.end(undefined, failure.reason);
        metrics.upstreamErrors.inc({ reason: failure.reason });
        logger.warn({ requestId: request.requestId, reason: failure.reason }, 'upstream failure');
        // Mid-answer, sendError can only cut the response off: the request's line says why.
        if (res.headersSent) markCutOff(res, `upstream ${failure.reason}`);
        sendError(res, failure.code, failure.message, failure.headers, failure.status);
      },
    });
    if (streamed) boundStreamedBody(req, res, abandon);
  };

  /** A chunked (or HTTP/2) body of no declared length: count it as it streams and stop at the limit. */
  function boundStreamedBody(req: IncomingMessage, res: ServerResponse, abandon: () => void): void {
    let received = 0;
    req.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received <= maxBodyBytes || res.headersSent) return;
      abandon();
      req.unpipe();
      closeAfterAnswer(req, res);
      sendError(res, 'payload_too_large', tooLarge);
    });
  }

  /**
   * HTTP/1.1: the unread body would be taken for the next request, so the connection closes after
   * the answer. HTTP/2 frames each stream apart (and forbids Connection): the stream ends alone.
   */
  function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
    if (req.httpVersionMajor !== 2) res.setHeader('Connection', 'close');
  }

  function observeUpstream(method: string, request: RequestContext, statusCode: number): void {
    if (request.upstreamStartedAt === null) return;
    const seconds = Number(process.hrtime.bigint() - request.upstreamStartedAt) / 1e9;
    request.upstreamMs = Math.round(seconds * 1e6) / 1e3;
    metrics.upstreamDuration.observe({ method, route: request.route?.template ?? UNMATCHED_ROUTE, status_code: String(statusCode) }, seconds);
  }
}
