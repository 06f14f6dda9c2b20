import type { Clock } from '../../shared/clock';
import { OutcomeWindow } from './outcome-window';

/** Closed: requests go through; open: none do; half-open: a few probes do. */
export type CircuitState = 'closed' | 'half_open' | 'open';

export interface CircuitBreakerSettings {
  /** The share of requests settled within `windowMs` that failed (timeouts, refused, reset, invalid answers) at which it opens: 0 < ratio <= 1. */
  failureRatio: number;
  /** Requests settled (succeeded or failed) within `windowMs` before the ratio is judged at all. */
  minimumRequests: number;
  /** How far back the ratio looks (a sliding window, in tenths). */
  windowMs: number;
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
 * How close together failures of one kind of pool event must come to be one event: the upstream
 * closing every pooled connection at once fails every request on them within a few milliseconds
 * (32 within 5 ms in the bench), delivered by a busy event loop over a few more.
 */
export const POOL_EVENT_MS = 50;

/**
 * A circuit breaker for one upstream (closed, open, half-open), as Envoy's outlier detection and
 * resilience4j have it: it opens once, over the last `windowMs`, at least `minimumRequests` requests
 * were settled and at least `failureRatio` of them failed; after `cooldownMs` it lets
 * `halfOpenProbes` requests through; one failure among them opens it again, that many successes
 * close it. A ratio over a window rather than a run of failures: at thousands of requests a second
 * one burst (every pooled connection reset at once) is a run of dozens among thousands of answers.
 * And failures the caller names as one pool event (`settle`'s `poolEvent`) that come within
 * POOL_EVENT_MS of the first of that event count once. Pure logic over an injected clock: the caller
 * reports outcomes.
 */
export class CircuitBreaker {
  private current: CircuitState = 'closed';
  private readonly window: OutcomeWindow;
  /** When the pool event of each kind now being counted began. */
  private readonly poolEventsAt = new Map<string, number>();
  private openedAt = 0;
  private probesOut = 0;
  private probeSuccesses = 0;

  constructor(
    private readonly settings: CircuitBreakerSettings,
    private readonly clock: Clock,
    private readonly onTransition: TransitionListener = () => {},
  ) {
    this.window = new OutcomeWindow(settings.windowMs);
  }

  get state(): CircuitState {
    // An open circuit whose cool-down has passed is half-open, whether or not a request has come.
    if (this.current === 'open' && this.clock.now() - this.openedAt >= this.settings.cooldownMs)
      this.moveTo('half_open', 'cool-down over');
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

  /**
   * How an admitted request ended; `none` (the client left, the gateway gave up) counts for nothing.
   * `poolEvent` names a failure that one event of the connection pool may have dealt to many
   * requests at once (a reset on a pooled connection): those of one kind within POOL_EVENT_MS of the
   * first count as that one failure.
   */
  settle(probe: boolean, outcome: Outcome, poolEvent?: string): void {
    if (probe) {
      this.probesOut--;
      // A probe from an earlier half-open spell that ends after the circuit moved on says nothing now.
      if (this.current !== 'half_open') return;
      if (outcome === 'failure') return this.open(`a probe failed`);
      if (outcome === 'success' && ++this.probeSuccesses >= this.settings.halfOpenProbes) this.close();
      return;
    }
    // Requests admitted before the circuit opened and settled after say nothing about the probes.
    if (outcome === 'none' || this.current !== 'closed') return;
    const now = this.clock.now();
    if (outcome === 'failure' && poolEvent !== undefined && this.partOfPoolEvent(poolEvent, now)) return;
    this.window.record(outcome, now);
    if (outcome === 'failure') this.judge(now);
  }

  /** Whether this failure belongs to a pool event already counted; if not, it begins one. */
  private partOfPoolEvent(kind: string, now: number): boolean {
    const began = this.poolEventsAt.get(kind);
    if (began !== undefined && now - began < POOL_EVENT_MS && now >= began) return true;
    this.poolEventsAt.set(kind, now);
    return false;
  }

  /** Opens the circuit when the window holds enough requests and enough of them failed. */
  private judge(now: number): void {
    const { successes, failures } = this.window.totals(now);
    const settled = successes + failures;
    if (settled < this.settings.minimumRequests || failures / settled < this.settings.failureRatio) return;
    this.open(`${failures} of ${settled} requests failed within ${this.settings.windowMs} ms`);
  }

  private open(why: string): void {
    this.openedAt = this.clock.now();
    // The failures that opened it are judged; after the probes close it, the window starts afresh.
    this.window.clear();
    this.moveTo('open', why);
  }

  private close(): void {
    this.moveTo('closed', `${this.probeSuccesses} probes answered`);
  }

  private moveTo(to: CircuitState, why: string): void {
    const from = this.current;
    this.current = to;
    this.probeSuccesses = 0;
    if (from !== to) this.onTransition(to, from, why);
  }
}
