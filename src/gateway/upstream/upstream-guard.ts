import type { ServerResponse } from 'node:http';
import { systemClock } from '../../shared/clock';
import { CircuitBreaker, type CircuitBreakerSettings, type Outcome } from './circuit-breaker';
import type {
  AttemptOptions,
  ForwardHandlers,
  Forwarder,
  ForwarderSettings,
  ForwarderStats,
  GuardedForwarder,
  UpstreamFailure,
  UpstreamRequest,
} from './forward-contract';
import { DeadlineTimer } from './deadline-timer';
import { FairShareQueue } from './fair-share-queue';
import { hasBody } from './request-body';
import { circuitOpen, DEADLINE_PASSED, OVERLOADED } from './upstream-failure';
import { answeredInFull, clientGone } from '../cut-off';
import { holdUntilUpstreamGone } from './upstream-hold';

/** The breaker's defaults, for a forwarder built without config (tests, the bench's bare children). */
export const DEFAULT_CIRCUIT_BREAKER: CircuitBreakerSettings = {
  failureRatio: 0.5,
  minimumRequests: 20,
  windowMs: 10_000,
  cooldownMs: 5000,
  halfOpenProbes: 3,
};

const NOTHING_TO_ABANDON = () => {};

/** The share of requests that name no tenant. */
const SHARED_TENANT = '';

/**
 * Connections no one key may take, kept for a key with nothing at the inventory (fair-share-queue.ts):
 * one in 16, none for a pool of fewer than 4 (too small to spare one).
 */
export function newcomerReserve(maxSockets: number): number {
  return maxSockets >= 4 ? Math.ceil(maxSockets / 16) : 0;
}

/** The breaker's name for resets on pooled connections: the inventory closing them all at once is one event (circuit-breaker.ts). */
const POOL_RESET = 'pool reset';

/** Methods a stale pooled connection may be retried for (RFC 9110 §9.2.2: idempotent, and safe to send twice). */
const RETRYABLE_METHODS = new Set(['GET', 'HEAD']);

/**
 * What stands between the request path and a forwarder (CONTRACT §3, the inventory slow or
 * hanging): a bound on requests at or waiting for the upstream, shared fairly across keys
 * (fair-share-queue.ts), a circuit breaker, and one deadline per request, counted from its arrival
 * at the gateway (UpstreamRequest.receivedAt) and set here, before the request waits; the deadlines
 * of every request held share one timer (deadline-timer.ts). The
 * forwarders' own timeouts (undici's headersTimeout, a socket timeout) start only once a connection
 * is theirs, so the n-th request queued behind a hung pool would wait n/maxSockets timeouts; this
 * deadline does not wait for that. Requests wait here, never in the pool: at most maxSockets are
 * handed to the forwarder at once, so the pool's own first-come queue stays empty.
 */
export class UpstreamGuard implements GuardedForwarder {
  private readonly breaker: CircuitBreaker;
  private readonly queue: FairShareQueue<GuardedRequest>;
  /** The deadline of every request held, queued or sent, until its head arrives. */
  readonly deadlines = new DeadlineTimer<GuardedRequest>();
  private readonly timeoutNs: bigint;

  constructor(
    private readonly inner: Forwarder,
    private readonly settings: ForwarderSettings,
  ) {
    this.breaker = new CircuitBreaker(
      settings.circuitBreaker ?? DEFAULT_CIRCUIT_BREAKER,
      settings.clock ?? systemClock,
      settings.onCircuitChange,
    );
    this.queue = new FairShareQueue(
      settings.maxSockets,
      settings.maxSockets + (settings.maxPending ?? settings.maxSockets),
      newcomerReserve(settings.maxSockets),
    );
    this.timeoutNs = BigInt(Math.round(settings.timeoutMs * 1e6));
  }

  forward(request: UpstreamRequest, res: ServerResponse, handlers: ForwardHandlers): () => void {
    // Its client left while the request waited (for the limiter, say): never sent, nothing held
    // (CONTRACT §3), and nobody to answer: the handlers are not called, its record was made on its close.
    if (clientGone(res)) return NOTHING_TO_ABANDON;
    const admission = this.breaker.admit();
    if (!admission.admitted) {
      handlers.onFailure(circuitOpen(admission.retryAfterMs));
      return NOTHING_TO_ABANDON;
    }
    const guarded = new GuardedRequest(request, handlers, this.inner, admission.probe, this);
    const offer = this.queue.offer(guarded.tenant, guarded);
    // Refused at once, before anything is held for the request: no timer, no pool entry.
    if (offer.outcome === 'refused') {
      this.breaker.settle(admission.probe, 'none');
      handlers.onFailure(OVERLOADED);
      return NOTHING_TO_ABANDON;
    }
    offer.evicted?.refuse(OVERLOADED);
    guarded.arm(this.timeoutNs, res);
    if (offer.outcome === 'start') guarded.send();
    return () => guarded.abandon();
  }

  /** The breaker's word on how a request went, once it is over (its place may come back later: `release`). */
  settle(guarded: GuardedRequest, outcome: Outcome, poolEvent?: string): void {
    this.breaker.settle(guarded.probe, outcome, poolEvent);
  }

  /** A request's hold on the guard ends; the freed place goes to the next in turn. */
  release(guarded: GuardedRequest, sent: boolean): void {
    if (!sent) {
      this.queue.withdraw(guarded.tenant, guarded);
      return;
    }
    this.queue.finish(guarded.tenant)?.send();
  }

  /** The inventory refused a connection: every waiting request gets the same answer now rather than its turn to be refused. */
  refuseWaiting(failure: UpstreamFailure): void {
    for (const { item } of this.queue.drain()) item.refuse(failure);
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
    return this.queue.size();
  }
}

/**
 * Where one guarded request stands. `queued`: waiting for its turn, its deadline running.
 * `waiting`: sent, its deadline running. `answering`: the upstream's head arrived, its body streams
 * (a stall, or a client that stops reading, is the forwarders' idle and pause deadlines' to end).
 * `over`: answered, failed, timed out, refused, abandoned or its client gone; the forwarder's late
 * word is dropped. An `over` request keeps its place until its upstream request is gone.
 */
type GuardedState = 'queued' | 'waiting' | 'answering' | 'over';

/** One request through the guard: its place, its deadline and the breaker's word on it, each settled once. */
class GuardedRequest {
  readonly tenant: string;
  private state: GuardedState = 'queued';
  /** When its time is up (process.hrtime.bigint()): timeoutMs after its arrival at the gateway. */
  deadlineAt = 0n;
  private abandonInner: () => void = NOTHING_TO_ABANDON;
  private res: ServerResponse | null = null;
  /** Attempts sent: a second is the one retry of a stale pooled connection. */
  private attempts = 0;
  /** Attempts whose upstream request is not gone yet: the place comes back when none is left. */
  private attemptsOut = 0;
  /** Marks the latest attempt's upstream request gone. */
  private latestGone: () => void = NOTHING_TO_ABANDON;
  private placeReturned = false;
  /** Given its turn (counted at the inventory by the queue), sent or not. */
  private started = false;
  /** The hold on the response that keeps its maxInFlight slot (upstream-hold.ts). */
  private letGoOfResponse: () => void = NOTHING_TO_ABANDON;

  constructor(
    private readonly request: UpstreamRequest,
    private readonly handlers: ForwardHandlers,
    private readonly inner: Forwarder,
    readonly probe: boolean,
    private readonly guard: UpstreamGuard,
  ) {
    this.tenant = request.tenant ?? SHARED_TENANT;
  }

  /** Starts the deadline and watches the client, from the moment the request is held, queued or sent. */
  arm(timeoutNs: bigint, res: ServerResponse): void {
    this.res = res;
    // The guard's one timer rather than one per request (deadline-timer.ts); not AbortSignal.timeout
    // either: that one cannot be cancelled, so every answered request would keep it alive for the whole timeout.
    this.deadlineAt = this.request.receivedAt + timeoutNs;
    this.guard.deadlines.add(this);
    this.letGoOfResponse = holdUntilUpstreamGone(res);
    // 'close' comes once: `on` spares the wrapper `once` makes for every request.
    res.on('close', () => this.clientClosed(res));
  }

  /**
   * The response closed. Answered in full, the upstream's answer was read to its end (a forwarder
   * ends the client's answer only then): a success, its upstream request gone. Otherwise the
   * client left (a closed connection, an HTTP/2 stream reset: issue 48) or the gateway cut it off:
   * the upstream request is abandoned now, and the place waits for it to be gone.
   */
  private clientClosed(res: ServerResponse): void {
    if (this.state === 'answering' && answeredInFull(res)) {
      this.latestGone();
      this.end('success');
      return;
    }
    this.end('none');
    this.abandonInner();
  }

  /** Its turn: hands the request to the forwarder, unless its client left while it waited. */
  send(): void {
    if (this.state !== 'queued') return;
    this.state = 'waiting';
    this.started = true;
    // Its close not yet read (a closed HTTP/2 session closes all its streams at once, and the first
    // to free its place hands it to the next): never sent, its place goes on to the next in turn.
    if (clientGone(this.res!)) this.end('none');
    else this.attempt({});
  }

  private attempt(options: AttemptOptions): void {
    const attempt = ++this.attempts;
    const gone = this.goneOnce();
    this.latestGone = gone;
    this.abandonInner = this.inner.forward(
      this.request,
      this.res!,
      {
        onResponse: (statusCode) => {
          if (attempt === this.attempts) this.headReceived(statusCode);
        },
        onFailure: (failure) => {
          // A failed attempt has left the inventory; gone first, so that a retry is counted on its own.
          gone();
          if (attempt === this.attempts) this.failed(failure);
        },
        onGone: gone,
      },
      options,
    );
  }

  /** One attempt out until the returned mark is called (once; later calls do nothing). */
  private goneOnce(): () => void {
    this.attemptsOut++;
    let gone = false;
    return () => {
      if (gone) return;
      gone = true;
      this.attemptsOut--;
      this.returnPlaceWhenGone();
    };
  }

  private failed(failure: UpstreamFailure): void {
    if (this.retriesStaleConnection(failure)) return;
    // After the deadline has answered, the forwarder's own late word is dropped; a failure after
    // the head (a cut body) still reaches the handler, which closes the client's connection.
    if (this.state === 'over') return;
    // Refused first, so that the place this one frees is not handed to a request bound to be refused too.
    if (failure.reason === 'refused') this.guard.refuseWaiting(failure);
    // A reset on a pooled connection (not the retry's own) may be one of many from one pool event.
    this.end('failure', failure.reason === 'reset' && this.attempts === 1 ? POOL_RESET : undefined);
    this.handlers.onFailure(failure);
  }

  /**
   * A pooled connection the upstream closed while this request was being written (an inventory
   * closing idle keep-alive connections, with or without a Keep-Alive hint): an idempotent request
   * without a body, no byte of the answer seen, is sent once more on a new connection within the
   * same deadline. The reset counts for nothing with the breaker; only the retry's outcome does.
   */
  private retriesStaleConnection(failure: UpstreamFailure): boolean {
    if (this.state !== 'waiting' || this.attempts > 1 || failure.reason !== 'reset') return false;
    if (!RETRYABLE_METHODS.has(this.request.method) || hasBody(this.request.client)) return false;
    this.attempt({ freshConnection: true });
    return true;
  }

  /** Answered by the guard itself without sending (its place given to a lighter key, the inventory refusing connections). */
  refuse(failure: UpstreamFailure): void {
    if (this.state !== 'queued') return;
    this.end('none');
    this.handlers.onFailure(failure);
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
    this.guard.deadlines.delete(this);
    this.handlers.onResponse?.(statusCode);
  }

  /** Called by the guard's deadline timer once deadlineAt has passed. */
  deadlinePassed(): void {
    // A client still sending its body is slow itself; that says nothing about the upstream, nor
    // does a request that never had its turn.
    const judged = this.state === 'waiting' && this.request.client.complete;
    this.end(judged ? 'failure' : 'none');
    this.abandonInner();
    this.handlers.onFailure(DEADLINE_PASSED);
  }

  /**
   * Ends the request once: its timer and the breaker's word now (a probe's word belongs to its own
   * half-open spell), its place once its upstream request is gone. False when it was over already.
   */
  private end(outcome: Outcome, poolEvent?: string): boolean {
    if (this.state === 'over') return false;
    this.state = 'over';
    this.guard.deadlines.delete(this);
    this.guard.settle(this, outcome, poolEvent);
    this.returnPlaceWhenGone();
    return true;
  }

  /**
   * The place (and the maxInFlight slot the response holds) comes back once the request is over and
   * none of its attempts is still at the inventory: a cancelled request's pool connection is free by
   * then, so the guard never has more than maxSockets at the inventory (issue 48).
   */
  private returnPlaceWhenGone(): void {
    if (this.state !== 'over' || this.attemptsOut > 0 || this.placeReturned) return;
    this.placeReturned = true;
    this.guard.release(this, this.started);
    this.letGoOfResponse();
  }
}
/** Puts a forwarder behind the guard. */
export function guardForwarder(inner: Forwarder, settings: ForwarderSettings): GuardedForwarder {
  return new UpstreamGuard(inner, settings);
}
