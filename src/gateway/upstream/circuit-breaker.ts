import type { Clock } from '../../shared/clock';

/** Closed: requests go through; open: none do; half-open: a few probes do. */
export type CircuitState = 'closed' | 'half_open' | 'open';

export interface CircuitBreakerSettings {
  /** Failures in a row (timeouts, refused, reset, invalid answers) that open the circuit. */
  consecutiveFailures: number;
  /** How long an open circuit refuses everything before it lets probes through. */
  cooldownMs: number;
  /** Requests let through at once while half-open; this many successes close the circuit. */
  halfOpenProbes: number;
}

/** What the breaker says about one request about to be sent. */
export type Admission =
  | { admitted: true; probe: boolean }
  /** Refused: the circuit is open (or its probes are all out); retry after this long. */
  | { admitted: false; retryAfterMs: number };

/** How a sent request ended, as the breaker counts it. */
export type Outcome = 'success' | 'failure' | 'none';

export type TransitionListener = (to: CircuitState, from: CircuitState, why: string) => void;

/**
 * A circuit breaker for one upstream (closed, open, half-open), as Envoy's outlier detection and
 * most client libraries have it: `consecutiveFailures` failures in a row open it; after
 * `cooldownMs` it lets `halfOpenProbes` requests through; one failure among them opens it again,
 * that many successes close it. Pure logic over an injected clock: the caller reports outcomes.
 */
export class CircuitBreaker {
  private current: CircuitState = 'closed';
  private failuresInARow = 0;
  private openedAt = 0;
  private probesOut = 0;
  private probeSuccesses = 0;

  constructor(
    private readonly settings: CircuitBreakerSettings,
    private readonly clock: Clock,
    private readonly onTransition: TransitionListener = () => {},
  ) {}

  get state(): CircuitState {
    // An open circuit whose cool-down has passed is half-open, whether or not a request has come.
    if (this.current === 'open' && this.clock.now() - this.openedAt >= this.settings.cooldownMs) this.moveTo('half_open', 'cool-down over');
    return this.current;
  }

  /** Whether a request may go to the upstream now; an admitted probe must be settled with `settle`. */
  admit(): Admission {
    const state = this.state;
    if (state === 'closed') return { admitted: true, probe: false };
    if (state === 'half_open' && this.probesOut < this.settings.halfOpenProbes) {
      this.probesOut++;
      return { admitted: true, probe: true };
    }
    // Half-open with every probe out: the answer is a probe's time away, a second at most to wait.
    const retryAfterMs = state === 'open' ? this.settings.cooldownMs - (this.clock.now() - this.openedAt) : 1000;
    return { admitted: false, retryAfterMs: Math.max(retryAfterMs, 1) };
  }

  /** How an admitted request ended; `none` (the client left, the gateway gave up) counts for nothing. */
  settle(probe: boolean, outcome: Outcome): void {
    if (probe) {
      this.probesOut--;
      // A probe from an earlier half-open spell that ends after the circuit moved on says nothing now.
      if (this.current !== 'half_open') return;
      if (outcome === 'failure') return this.open(`a probe failed`);
      if (outcome === 'success' && ++this.probeSuccesses >= this.settings.halfOpenProbes) this.close();
      return;
    }
    if (outcome === 'success') this.failuresInARow = 0;
    if (outcome !== 'failure' || this.current !== 'closed') return;
    if (++this.failuresInARow >= this.settings.consecutiveFailures) this.open(`${this.failuresInARow} failures in a row`);
  }

  private open(why: string): void {
    this.openedAt = this.clock.now();
    this.moveTo('open', why);
  }

  private close(): void {
    this.failuresInARow = 0;
    this.moveTo('closed', `${this.probeSuccesses} probes answered`);
  }

  private moveTo(to: CircuitState, why: string): void {
    const from = this.current;
    this.current = to;
    this.probeSuccesses = 0;
    if (from !== to) this.onTransition(to, from, why);
  }
}
