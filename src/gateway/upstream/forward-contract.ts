import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from '../../shared/clock';
import type { ErrorCode } from '../../shared/errors';
import type { CircuitBreakerSettings, CircuitState } from './circuit-breaker';

/** Why forwarding failed, as the contract names it, plus the metric label. */
export interface UpstreamFailure {
  code: Extract<ErrorCode, 'upstream_unavailable' | 'upstream_timeout'>;
  message: string;
  /**
   * `refused`, `timeout`, `reset`, `invalid_response`, `other`, and the guard's own `overloaded`
   * and `circuit_open`: gateway_upstream_errors_total{reason}.
   */
  reason: string;
  /** 503 for the guard's refusals (CONTRACT §3); absent, the code's own status (502, 504). */
  status?: 503;
  /** Headers of the answer, Retry-After for the guard's refusals. */
  headers?: Record<string, string>;
}

/**
 * The request as the inventory gets it, prepared by the forward step (steps/forward.ts). The
 * client's own request is read for its body and left as it came: nothing of it is rewritten.
 */
export interface UpstreamRequest {
  method: string;
  /** The target in origin form (`/v1/pets?limit=1`), whatever form the client used; under the upstream's base path. */
  path: string;
  /** The client's headers minus credentials, hop-by-hop and forwarding ones, plus the gateway's (upstream-headers.ts). */
  headers: IncomingHttpHeaders;
  /** The client's request: its body (when it has one) is streamed up as it arrives. */
  client: IncomingMessage;
  /**
   * When the gateway received the request (process.hrtime.bigint()): the deadline counts from it, so
   * that a slow store ahead of the forward does not push the answer past timeoutMs + 1 s.
   */
  receivedAt: bigint;
  /**
   * Whose request this is (the key's id): the guard shares its bound and its connections fairly
   * across these (fair-share-queue.ts). Absent: one shared share.
   */
  tenant?: string;
}

/** How one attempt is sent. */
export interface AttemptOptions {
  /**
   * On a connection opened for it, not one from the pool: the retry of an idempotent request whose
   * pooled connection was closed under it (the upstream closing idle keep-alive connections).
   */
  freshConnection?: boolean;
}

export interface ForwardHandlers {
  /** Called once when the upstream could not answer; headers may already be sent. */
  onFailure(failure: UpstreamFailure): void;
  /** Called when the upstream's response head has been taken for the client (for upstream duration). */
  onResponse?(statusCode: number): void;
  /**
   * Called once the upstream request is gone: its answer read to the end, or the request failed or
   * was abandoned and its connection let go. What the request holds (its place in the guard, its
   * maxInFlight slot) comes back only then (CONTRACT §3). A failure reported says as much.
   */
  onGone?(): void;
}

/** What the forwarder holds right now: requests not yet finished, and connections to the upstream. */
export interface ForwarderStats {
  activeRequests: number;
  openConnections: number;
}

/** Sends a prepared request to the inventory and streams the answer back. */
export interface Forwarder {
  /** Starts forwarding; the returned function abandons the upstream request (e.g. body too large). */
  forward(
    request: UpstreamRequest,
    res: ServerResponse,
    handlers: ForwardHandlers,
    options?: AttemptOptions,
  ): () => void;
  /** For tests and diagnostics: whether requests and connections are released. */
  stats(): ForwarderStats;
  close(): void | Promise<void>;
}

/** A forwarder behind the upstream guard (src/gateway/upstream/upstream-guard.ts): what it holds and its breaker's state. */
export interface GuardedForwarder extends Forwarder {
  circuitState(): CircuitState;
  /** Requests at or waiting for the upstream right now, as the guard counts them. */
  inFlight(): number;
}

export interface ForwarderSettings {
  target: string;
  /** The whole wait for an answer's head, a free connection included. */
  timeoutMs: number;
  maxSockets: number;
  /** Requests that may wait for a connection beyond maxSockets; past them, 503. Default: maxSockets. */
  maxPending?: number;
  /** Default: DEFAULT_CIRCUIT_BREAKER. */
  circuitBreaker?: CircuitBreakerSettings;
  /** The breaker's transitions, for the log and gateway_upstream_circuit_state. */
  onCircuitChange?: (to: CircuitState, from: CircuitState, why: string) => void;
  clock?: Clock;
}
