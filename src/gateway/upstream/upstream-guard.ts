import type { IncomingMessage, ServerResponse } from 'node:http';
import { systemClock } from '../../shared/clock';
import { CircuitBreaker, type CircuitBreakerSettings, type Outcome } from './circuit-breaker';
import type { ForwardHandlers, Forwarder, ForwarderSettings, ForwarderStats, GuardedForwarder, UpstreamFailure } from './forward-contract';

/** The breaker's defaults, for a forwarder built without config (tests, the bench's bare children). */
export const DEFAULT_CIRCUIT_BREAKER: CircuitBreakerSettings = { consecutiveFailures: 5, cooldownMs: 5000, halfOpenProbes: 3 };

/** Seconds for Retry-After: whole, at least one. */
function retryAfterSeconds(ms: number): string {
  return String(Math.max(1, Math.ceil(ms / 1000)));
}

function overloaded(): UpstreamFailure {
  return {
    code: 'upstream_unavailable',
    status: 503,
    reason: 'overloaded',
    message: 'Too many requests are waiting for the inventory service. Retry shortly.',
    headers: { 'Retry-After': '1' },
  };
}

function circuitOpen(retryAfterMs: number): UpstreamFailure {
  return {
    code: 'upstream_unavailable',
    status: 503,
    reason: 'circuit_open',
    message: 'The inventory service is failing; the gateway is not sending it requests for a moment. Retry later.',
    headers: { 'Retry-After': retryAfterSeconds(retryAfterMs) },
  };
}

const DEADLINE_PASSED: UpstreamFailure = { code: 'upstream_timeout', reason: 'timeout', message: 'The inventory service did not answer in time.' };

const NOTHING_TO_ABANDON = () => {};

/** Time since the gateway received the request; 0 when the caller did not say. */
function elapsedMs(receivedAt: bigint | undefined): number {
  return receivedAt === undefined ? 0 : Number(process.hrtime.bigint() - receivedAt) / 1e6;
}

/**
 * What stands between the request path and a forwarder (CONTRACT §3, the inventory slow or
 * hanging): a bound on requests at or waiting for the upstream, a circuit breaker, and one deadline
 * per request, counted from its arrival at the gateway (ForwardHandlers.receivedAt) and set here,
 * before the pool queues it. The forwarders' own timeouts (undici's
 * headersTimeout, a socket timeout) start only once a connection is theirs, so the n-th request
 * queued behind a hung pool would wait n/maxSockets timeouts; this deadline does not wait for that.
 */
export function guardForwarder(inner: Forwarder, settings: ForwarderSettings): GuardedForwarder {
  const breaker = new CircuitBreaker(settings.circuitBreaker ?? DEFAULT_CIRCUIT_BREAKER, settings.clock ?? systemClock, settings.onCircuitChange);
  const maxInFlight = settings.maxSockets + (settings.maxPending ?? settings.maxSockets);
  let inFlight = 0;

  function forward(req: IncomingMessage, res: ServerResponse, handlers: ForwardHandlers): () => void {
    // Refused at once, before anything is held for the request: no timer, no pool entry.
    if (inFlight >= maxInFlight) {
      handlers.onFailure(overloaded());
      return NOTHING_TO_ABANDON;
    }
    const admission = breaker.admit();
    if (!admission.admitted) {
      handlers.onFailure(circuitOpen(admission.retryAfterMs));
      return NOTHING_TO_ABANDON;
    }
    inFlight++;
    let released = false;
    let judged = false;
    let headReceived = false;
    /** Ends the request's hold on the guard once: its slot and its timer. */
    const release = () => {
      if (released) return false;
      released = true;
      inFlight--;
      clearTimeout(deadline);
      return true;
    };
    /** The breaker's word on this request, once: a cut body after a good head is a failure too. */
    const judge = (outcome: Outcome) => {
      if (judged) return false;
      judged = true;
      breaker.settle(admission.probe, outcome);
      return true;
    };
    // A plain timer rather than AbortSignal.timeout: that one cannot be cancelled, so every answered
    // request would keep its timer (and what it closes over) alive for the whole timeout.
    const deadline = setTimeout(() => {
      // A client still sending its body is slow itself; that says nothing about the upstream.
      judge(req.complete ? 'failure' : 'none');
      release();
      abandonInner();
      handlers.onFailure(DEADLINE_PASSED);
    }, settings.timeoutMs - elapsedMs(handlers.receivedAt));
    res.once('close', () => {
      judge(headReceived && res.writableFinished ? 'success' : 'none');
      release();
    });

    const abandonInner = inner.forward(req, res, {
      onResponse(statusCode) {
        if (released) return;
        // The head is the answer the deadline waits for; a stalled body is the forwarders' idle timeouts' to end.
        headReceived = true;
        clearTimeout(deadline);
        handlers.onResponse?.(statusCode);
      },
      onFailure(failure) {
        judge('failure');
        // After the deadline has answered, the forwarder's own late word is dropped; a failure after
        // the head (a cut body) still reaches the handler, which closes the client's connection.
        if (release() || headReceived) handlers.onFailure(failure);
      },
    });
    return () => {
      judge('none');
      release();
      abandonInner();
    };
  }

  return {
    forward,
    stats: (): ForwarderStats => inner.stats(),
    close: () => inner.close(),
    circuitState: () => breaker.state,
    inFlight: () => inFlight,
  };
}
