import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../../shared/logger';
import type { StepSpan } from '../../shared/telemetry/telemetry';
import { sendError } from '../../shared/errors';
import { UNMATCHED_ROUTE } from '../../shared/public-api';
import type { UpstreamTokenSigner } from '../../shared/http/upstream-token';
import type { ForwardHandlers, Forwarder, UpstreamFailure, UpstreamRequest } from '../upstream/forward-contract';
import { upstreamHeaders } from '../upstream/upstream-headers';
import { bodyOfUnknownLength } from '../upstream/request-body';
import type { GatewayMetrics } from '../../shared/metrics/metrics';
import { keyOf, type GatewayRequest } from '../request-context';
import { markCutOff } from '../cut-off';
import { bodyTooLarge, upstreamRefusal, type Refusal } from '../refusals';
import { ANSWERED, type StepOutcome } from '../step-outcome';

export interface ForwardDependencies {
  forwarder: Forwarder;
  signer: UpstreamTokenSigner;
  metrics: GatewayMetrics;
  logger: Logger;
  maxBodyBytes: number;
  /** Config `server.publicBaseUrl`: the scheme and host the inventory is told clients used. */
  publicBaseUrl: string | null;
}

/**
 * The last step: sign, prepare the upstream request, and stream it to the inventory with the body
 * bounded. Its outcome is known once the inventory's answer begins (ANSWERED: the forwarder writes
 * it), or the request is refused first: 413 for a body too large, 502/503/504 when the inventory
 * could not answer or the guard did not send.
 */
export function createForwardStep(deps: ForwardDependencies) {
  const { signer, maxBodyBytes } = deps;
  const publicBase = deps.publicBaseUrl ? new URL(deps.publicBaseUrl) : null;
  const forwardedProto = publicBase ? publicBase.protocol.slice(0, -1) : 'http';
  const forwardedHost = publicBase ? publicBase.host : null;
  const tooLarge = bodyTooLarge(maxBodyBytes);
  const send = createSend(deps, tooLarge);

  /** The request as the inventory gets it, its token signed. */
  function prepare(request: GatewayRequest, keyId: string, token: string): UpstreamRequest {
    const { req } = request;
    return {
      method: request.method,
      path: request.originForm,
      headers: upstreamHeaders(req.headers, {
        token,
        requestId: request.requestId,
        clientAddress: request.clientAddress,
        forwardedProto,
        forwardedHost,
      }),
      client: req,
      // The upstream deadline counts from the request's arrival, the wait for a connection included.
      receivedAt: request.startedAt,
      // The guard shares the inventory fairly across keys (CONTRACT §3, one caller).
      tenant: keyId,
    };
  }

  async function signAndSend(request: GatewayRequest, keyId: string): Promise<StepOutcome> {
    const token = await signer.sign({ keyId, plan: request.plan });
    return send(request, prepare(request, keyId, token));
  }

  return function forward(request: GatewayRequest): Promise<StepOutcome> | StepOutcome {
    const { req, res } = request;
    const declaredLength = Number(req.headers['content-length'] ?? 0);
    if (declaredLength > maxBodyBytes) return closeAfterAnswer(req, res, tooLarge);
    const keyId = keyOf(request).id;
    // The key's token as signed for an earlier request (most requests): no promise to wait on.
    const token = signer.cachedToken(keyId, request.plan);
    if (token === undefined) return signAndSend(request, keyId);
    return send(request, prepare(request, keyId, token));
  };
}

/** Streams the request up; settles on the answer's head, or on the refusal that comes first. */
function createSend(
  deps: ForwardDependencies,
  tooLarge: Refusal,
): (request: GatewayRequest, upstream: UpstreamRequest) => Promise<StepOutcome> {
  const { forwarder, maxBodyBytes } = deps;
  return function send(request, upstream) {
    const { req, res } = request;
    // The inventory's traceparent names the forward span (with tracing off the client's passes untouched).
    const span = request.span;
    const forwarding = span?.step('forward');
    if (span && forwarding) span.propagate(upstream.headers, forwarding);
    request.upstreamStartedAt = process.hrtime.bigint();

    return new Promise<StepOutcome>((settle) => {
      const exchange = new ForwardExchange(request, forwarding, settle, deps);
      const abandon = forwarder.forward(upstream, res, exchange);
      if (bodyOfUnknownLength(req)) {
        whenBodyExceeds(req, maxBodyBytes, () => {
          // Past the head, the answer has begun: the body's end is the answer's business.
          if (exchange.settledWith !== null || res.headersSent) return;
          abandon();
          req.unpipe();
          exchange.answer(closeAfterAnswer(req, res, tooLarge));
        });
      }
    });
  };
}

/**
 * One request's forwarding, as the forwarder reports it: the handlers are its methods (one object
 * per request rather than a closure for each), and it settles the step's outcome once.
 */
class ForwardExchange implements ForwardHandlers {
  settledWith: StepOutcome | null = null;

  constructor(
    private readonly request: GatewayRequest,
    private readonly forwarding: StepSpan | undefined,
    private readonly settle: (outcome: StepOutcome) => void,
    private readonly deps: ForwardDependencies,
  ) {}

  answer(outcome: StepOutcome): void {
    this.settledWith = outcome;
    this.settle(outcome);
  }

  onResponse(statusCode: number): void {
    this.forwarding?.end({ 'http.response.status_code': statusCode });
    observeUpstream(this.deps.metrics, this.request, statusCode);
    this.answer(ANSWERED);
  }

  onFailure(failure: UpstreamFailure): void {
    const { settledWith, request } = this;
    // Refused already (413): the abandoned request's own end is no news.
    if (settledWith !== null && settledWith !== ANSWERED) return;
    this.forwarding?.end(undefined, failure.reason);
    this.deps.metrics.upstreamErrors.inc({ reason: failure.reason });
    this.deps.logger.warn({ requestId: request.requestId, reason: failure.reason }, 'upstream failure');
    if (settledWith === null) this.answer(upstreamRefusal(failure));
    else cutOff(request.res, failure);
  }
}

/** The label values of the upstream histogram, filled in per request: the tally reads them at once and keeps none. */
const upstreamLabels = ['', '', ''];

function observeUpstream(metrics: GatewayMetrics, request: GatewayRequest, statusCode: number): void {
  if (request.upstreamStartedAt === null) return;
  const seconds = Number(process.hrtime.bigint() - request.upstreamStartedAt) / 1e9;
  request.upstreamMs = Math.round(seconds * 1e6) / 1e3;
  upstreamLabels[0] = request.method;
  upstreamLabels[1] = request.route?.template ?? UNMATCHED_ROUTE;
  upstreamLabels[2] = String(statusCode);
  metrics.upstreamDurations.observe(upstreamLabels, seconds);
}

/** A chunked (or HTTP/2) body of no declared length: counted as it streams, `exceeded` called past the limit. */
function whenBodyExceeds(req: IncomingMessage, maxBodyBytes: number, exceeded: () => void): void {
  let received = 0;
  req.on('data', (chunk: Buffer) => {
    received += chunk.length;
    if (received > maxBodyBytes) exceeded();
  });
}

/**
 * The inventory's answer had begun when it failed: mid-answer, the only answer left is to cut it
 * off, and the request's line says why. (A head node:http refused is answered whole instead.)
 */
function cutOff(res: ServerResponse, failure: UpstreamFailure): void {
  if (res.headersSent) markCutOff(res, `upstream ${failure.reason}`);
  sendError(res, failure.code, failure.message, failure);
}

/**
 * HTTP/1.1: the unread body would be taken for the next request, so the connection closes after
 * the answer. HTTP/2 frames each stream apart (and forbids Connection): the stream ends alone.
 */
function closeAfterAnswer(req: IncomingMessage, res: ServerResponse, refusal: Refusal): Refusal {
  if (req.httpVersionMajor !== 2) res.setHeader('Connection', 'close');
  return refusal;
}
