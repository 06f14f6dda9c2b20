import type { ServerResponse } from 'node:http';
import { systemClock } from '../../shared/clock';
import { CircuitBreaker, type CircuitBreakerSettings, type Outcome } from './circuit-breaker';
import type { ForwardHandlers, Forwarder, ForwarderSettings, ForwarderStats, GuardedForwarder, UpstreamRequest } from './forward-contract';
import { circuitOpen, DEADLINE_PASSED, OVERLOADED } from './upstream-failure';

/** The breaker's defaults, for a forwarder built without config (tests, the bench's bare children). */
export const DEFAULT_CIRCUIT_BREAKER: CircuitBreakerSettings = { consecutiveFailures: 5, cooldownMs: 5000, halfOpenProbes: 3 };

const NOTHING_TO_ABANDON = () => {};

/**
 * What stands between the request path and a forwarder (CONTRACT §3, the inventory slow or
 * hanging): a bound on requests at or waiting for the upstream, a circuit breaker, and one deadline
 * per request, counted from its arrival at the gateway (UpstreamRequest.receivedAt) and set here,
 * before the pool queues it. The forwarders' own timeouts (undici's headersTimeout, a socket
 * timeout) start only once a connection is theirs, so the n-th request queued behind a hung pool
 * would wait n/maxSockets timeouts; this deadline does not wait for that.
 */
export class UpstreamGuard implements GuardedForwarder {
  private readonly breaker: CircuitBreaker;
  private readonly maxInFlight: number;
  private inFlightCount = 0;

  constructor(
    private readonly inner: Forwarder,
    private readonly settings: ForwarderSettings,
  ) {
    this.breaker = new CircuitBreaker(settings.circuitBreaker ?? DEFAULT_CIRCUIT_BREAKER, settings.clock ?? systemClock, settings.onCircuitChange);
    this.maxInFlight = settings.maxSockets + (settings.maxPending ?? settings.maxSockets);
  }

  forward(request: UpstreamRequest, res: ServerResponse, handlers: ForwardHandlers): () => void {
    // Refused at once, before anything is held for the request: no timer, no pool entry.
    if (this.inFlightCount >= this.maxInFlight) {
      handlers.onFailure(OVERLOADED);
      return NOTHING_TO_ABANDON;
    }
    const admission = this.breaker.admit();
    if (!admission.admitted) {
      handlers.onFailure(circuitOpen(admission.retryAfterMs));
      return NOTHING_TO_ABANDON;
    }
    this.inFlightCount++;
    const guarded = new GuardedRequest(request, handlers, (outcome) => this.release(admission.probe, outcome));
    guarded.start(this.settings.timeoutMs, res, this.inner);
    return () => guarded.abandon();
  }

  /** A request's hold on the guard ends, with the breaker's word on how it went. */
  private release(probe: boolean, outcome: Outcome): void {
    this.inFlightCount--;
    this.breaker.settle(probe, outcome);
  }

  stats(): ForwarderStats {
    return this.inner.stats();
  }

  close(): void | Promise<void> {
    return this.inner.close();
  }

  circuitState() {
    return this.breaker.state;
  }

  inFlight(): number {
    return this.inFlightCount;
  }
}

/**
 * Where one guarded request stands. `waiting`: sent or queued, its deadline running. `answering`:
 * the upstream's head arrived, its body streams (a stall is the forwarders' idle timeouts' to end).
 * `over`: answered, failed, timed out, abandoned or its client gone; the forwarder's late word is dropped.
 */
type GuardedState = 'waiting' | 'answering' | 'over';

/** One request through the guard: its slot, its deadline and the breaker's word on it, each settled once. */
class GuardedRequest {
  private state: GuardedState = 'waiting';
  private deadline: NodeJS.Timeout | undefined;
  private abandonInner: () => void = NOTHING_TO_ABANDON;

  constructor(
    private readonly request: UpstreamRequest,
    private readonly handlers: ForwardHandlers,
    private readonly release: (outcome: Outcome) => void,
  ) {}

  start(timeoutMs: number, res: ServerResponse, inner: Forwarder): void {
    const elapsedMs = Number(process.hrtime.bigint() - this.request.receivedAt) / 1e6;
    // A plain timer rather than AbortSignal.timeout: that one cannot be cancelled, so every answered
    // request would keep its timer (and what it closes over) alive for the whole timeout.
    this.deadline = setTimeout(() => this.deadlinePassed(), timeoutMs - elapsedMs);
    res.once('close', () => this.end(this.state === 'answering' && res.writableFinished ? 'success' : 'none'));
    this.abandonInner = inner.forward(this.request, res, {
      onResponse: (statusCode) => this.headReceived(statusCode),
      onFailure: (failure) => {
        // After the deadline has answered, the forwarder's own late word is dropped; a failure after
        // the head (a cut body) still reaches the handler, which closes the client's connection.
        if (this.end('failure')) this.handlers.onFailure(failure);
      },
    });
  }

  /** Stops the request on the gateway's side (a body too large): nothing to judge the upstream by. */
  abandon(): void {
    this.end('none');
    this.abandonInner();
  }

  private headReceived(statusCode: number): void {
    if (this.state !== 'waiting') return;
    this.state = 'answering';
    // The head is the answer the deadline waits for.
    clearTimeout(this.deadline);
    this.handlers.onResponse?.(statusCode);
  }

  private deadlinePassed(): void {
    // A client still sending its body is slow itself; that says nothing about the upstream.
    this.end(this.request.client.complete ? 'failure' : 'none');
    this.abandonInner();
    this.handlers.onFailure(DEADLINE_PASSED);
  }

  /** Ends the request's hold once: its slot, its timer and the breaker's word. False when it was over already. */
  private end(outcome: Outcome): boolean {
    if (this.state === 'over') return false;
    this.state = 'over';
    clearTimeout(this.deadline);
    this.release(outcome);
    return true;
  }
}

/** Puts a forwarder behind the guard. */
export function guardForwarder(inner: Forwarder, settings: ForwarderSettings): GuardedForwarder {
  return new UpstreamGuard(inner, settings);
}
