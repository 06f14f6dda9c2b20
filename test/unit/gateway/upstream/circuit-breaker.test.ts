import { ManualClock } from '../../../../src/shared/clock';
import {
  CircuitBreaker,
  POOL_EVENT_MS,
  type CircuitBreakerSettings,
  type CircuitState,
} from '../../../../src/gateway/upstream/circuit-breaker';
import { DEFAULT_CIRCUIT_BREAKER } from '../../../../src/gateway/upstream/upstream-guard';

const SETTINGS: CircuitBreakerSettings = {
  failureRatio: 0.5,
  minimumRequests: 4,
  windowMs: 10_000,
  cooldownMs: 5000,
  halfOpenProbes: 2,
};

function breakerWithLog(settings = SETTINGS) {
  const clock = new ManualClock();
  const transitions: string[] = [];
  const whys: string[] = [];
  const breaker = new CircuitBreaker(settings, clock, (to: CircuitState, from: CircuitState, why: string) => {
    transitions.push(`${from}->${to}`);
    whys.push(why);
  });
  return { clock, breaker, transitions, whys };
}

function fail(breaker: CircuitBreaker, times: number, poolEvent?: string): void {
  for (let i = 0; i < times; i++) {
    const admission = breaker.admit();
    if (!admission.admitted) throw new Error('refused');
    breaker.settle(admission.probe, 'failure', poolEvent);
  }
}

function succeed(breaker: CircuitBreaker, times: number): void {
  for (let i = 0; i < times; i++) breaker.settle(false, 'success');
}

describe('CircuitBreaker', () => {
  it('opens once minimumRequests were settled within the window and failureRatio of them failed', () => {
    const { breaker, transitions, whys } = breakerWithLog();
    // Three failures in a row are fewer than the minimum: nothing is judged yet.
    fail(breaker, 3);
    expect(breaker.state).toBe('closed');
    succeed(breaker, 4);
    // 4 of 8 failed: the ratio is reached with the failure that makes it.
    fail(breaker, 1);
    expect(breaker.state).toBe('open');
    expect(transitions).toEqual(['closed->open']);
    expect(whys).toEqual(['4 of 8 requests failed within 10000 ms']);
  });

  it('under the ratio it stays closed, however many failures in a row', () => {
    const { breaker } = breakerWithLog();
    succeed(breaker, 20);
    fail(breaker, 19);
    expect(breaker.state).toBe('closed');
    fail(breaker, 1);
    expect(breaker.state).toBe('open');
  });

  it('outcomes older than the window drop out of it', () => {
    const { clock, breaker } = breakerWithLog();
    fail(breaker, 3);
    clock.advance(SETTINGS.windowMs);
    // The three failures are a window ago: one more is 1 of 1 settled, under the minimum.
    fail(breaker, 1);
    expect(breaker.state).toBe('closed');
    clock.advance(SETTINGS.windowMs / 2);
    fail(breaker, 2);
    expect(breaker.state).toBe('closed');
    fail(breaker, 1);
    expect(breaker.state).toBe('open');
  });

  it('requests that end with no verdict (the client left) neither open nor close it', () => {
    const { breaker } = breakerWithLog();
    for (let i = 0; i < 10; i++) breaker.settle(false, 'none');
    fail(breaker, 3);
    breaker.settle(false, 'none');
    expect(breaker.state).toBe('closed');
    fail(breaker, 1);
    expect(breaker.state).toBe('open');
  });

  it('with the defaults, a burst of 32 resets within 5 ms among thousands of answers does not open it', () => {
    const { clock, breaker, transitions } = breakerWithLog(DEFAULT_CIRCUIT_BREAKER);
    // 3,000 answers a second for a second, then 32 failures within 5 ms, then answers again.
    for (let ms = 0; ms < 1000; ms++, clock.advance(1)) succeed(breaker, 3);
    for (let i = 0; i < 32; i++) {
      fail(breaker, 1);
      if (i % 7 === 6) clock.advance(1);
    }
    for (let ms = 0; ms < 1000; ms++, clock.advance(1)) succeed(breaker, 3);
    expect(transitions).toEqual([]);
    expect(breaker.admit()).toEqual({ admitted: true, probe: false });
  });

  it('with the defaults, a real outage (every request failing) opens it at the minimum', () => {
    const { clock, breaker, transitions, whys } = breakerWithLog(DEFAULT_CIRCUIT_BREAKER);
    for (let i = 0; i < DEFAULT_CIRCUIT_BREAKER.minimumRequests - 1; i++, clock.advance(1)) fail(breaker, 1);
    expect(breaker.state).toBe('closed');
    fail(breaker, 1);
    expect(transitions).toEqual(['closed->open']);
    expect(whys).toEqual(['20 of 20 requests failed within 10000 ms']);
  });

  it('with the defaults, an inventory failing half of a busy stream of requests opens it', () => {
    const { clock, breaker, transitions } = breakerWithLog(DEFAULT_CIRCUIT_BREAKER);
    for (let ms = 0; ms < 100 && transitions.length === 0; ms++, clock.advance(1)) {
      succeed(breaker, 5);
      fail(breaker, 5);
    }
    expect(transitions).toEqual(['closed->open']);
  });

  it('failures of one pool event count once: those within POOL_EVENT_MS of its first, of the same kind', () => {
    const { clock, breaker } = breakerWithLog({ ...SETTINGS, minimumRequests: 2, failureRatio: 1 });
    // 32 resets of the pooled connections, within 5 ms: one failure, under the minimum of 2.
    for (let i = 0; i < 32; i++) {
      fail(breaker, 1, 'pool reset');
      if (i % 8 === 7) clock.advance(1);
    }
    expect(breaker.state).toBe('closed');
    // Still within POOL_EVENT_MS of the event's first failure: the same event.
    clock.advance(POOL_EVENT_MS - 5);
    fail(breaker, 1, 'pool reset');
    expect(breaker.state).toBe('closed');
    // A failure that is no pool event counts on its own.
    fail(breaker, 1);
    expect(breaker.state).toBe('open');
  });

  it('a pool event that lasts is counted once per POOL_EVENT_MS: an inventory resetting every request still opens it', () => {
    const { clock, breaker, transitions } = breakerWithLog(DEFAULT_CIRCUIT_BREAKER);
    let elapsedMs = 0;
    // Ten requests a millisecond, each reset on a pooled connection.
    for (; elapsedMs < 5000 && transitions.length === 0; elapsedMs++, clock.advance(1)) {
      for (let i = 0; i < 10; i++) breaker.settle(false, 'failure', 'pool reset');
    }
    expect(transitions).toEqual(['closed->open']);
    // The 20th event begins (DEFAULT minimumRequests) 19 × POOL_EVENT_MS after the first.
    expect(elapsedMs).toBe(19 * POOL_EVENT_MS + 1);
  });

  it('open: refuses with the rest of the cool-down as Retry-After, then lets exactly halfOpenProbes through', () => {
    const { clock, breaker, transitions } = breakerWithLog();
    fail(breaker, 4);
    clock.advance(1200);
    expect(breaker.admit()).toEqual({ admitted: false, retryAfterMs: 3800 });
    clock.advance(3800);
    expect(breaker.state).toBe('half_open');
    expect(breaker.admit()).toEqual({ admitted: true, probe: true });
    expect(breaker.admit()).toEqual({ admitted: true, probe: true });
    expect(breaker.admit()).toEqual({ admitted: false, retryAfterMs: 1000 });
    breaker.settle(true, 'success');
    expect(breaker.state).toBe('half_open');
    breaker.settle(true, 'success');
    expect(breaker.state).toBe('closed');
    expect(transitions).toEqual(['closed->open', 'open->half_open', 'half_open->closed']);
  });

  it('a failed probe opens it again for a whole cool-down; a probe whose client left frees its slot', () => {
    const { clock, breaker, transitions } = breakerWithLog();
    fail(breaker, 4);
    clock.advance(5000);
    const first = breaker.admit();
    expect(first).toEqual({ admitted: true, probe: true });
    breaker.settle(true, 'none');
    const second = breaker.admit();
    expect(second).toEqual({ admitted: true, probe: true });
    breaker.settle(true, 'failure');
    expect(breaker.state).toBe('open');
    expect(breaker.admit()).toEqual({ admitted: false, retryAfterMs: 5000 });
    expect(transitions).toEqual(['closed->open', 'open->half_open', 'half_open->open']);
  });

  it('closed again by its probes, it judges a fresh window: the failures that opened it are gone', () => {
    const { clock, breaker, transitions } = breakerWithLog();
    fail(breaker, 4);
    clock.advance(SETTINGS.cooldownMs);
    for (let probe = 0; probe < SETTINGS.halfOpenProbes; probe++) {
      expect(breaker.admit()).toEqual({ admitted: true, probe: true });
      breaker.settle(true, 'success');
    }
    expect(breaker.state).toBe('closed');
    // The four that opened it are not in the window (5 s old): three more are under the minimum.
    fail(breaker, 3);
    expect(breaker.state).toBe('closed');
    fail(breaker, 1);
    expect(transitions).toEqual(['closed->open', 'open->half_open', 'half_open->closed', 'closed->open']);
  });
});
