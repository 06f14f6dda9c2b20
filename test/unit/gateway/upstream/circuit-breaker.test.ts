import { ManualClock } from '../../../../src/shared/clock';
import { CircuitBreaker, type CircuitState } from '../../../../src/gateway/upstream/circuit-breaker';

const SETTINGS = { consecutiveFailures: 3, cooldownMs: 5000, halfOpenProbes: 2 };

function breakerWithLog() {
  const clock = new ManualClock();
  const transitions: string[] = [];
  const breaker = new CircuitBreaker(SETTINGS, clock, (to: CircuitState, from: CircuitState) => transitions.push(`${from}->${to}`));
  return { clock, breaker, transitions };
}

function fail(breaker: CircuitBreaker, times: number): void {
  for (let i = 0; i < times; i++) {
    const admission = breaker.admit();
    if (!admission.admitted) throw new Error('refused');
    breaker.settle(admission.probe, 'failure');
  }
}

describe('CircuitBreaker', () => {
  it('opens after the configured failures in a row, and a success in between starts the count again', () => {
    const { breaker, transitions } = breakerWithLog();
    fail(breaker, 2);
    breaker.settle(false, 'success');
    fail(breaker, 2);
    expect(breaker.state).toBe('closed');
    fail(breaker, 1);
    expect(breaker.state).toBe('open');
    expect(transitions).toEqual(['closed->open']);
  });

  it('requests that end with no verdict (the client left) neither open nor close it', () => {
    const { breaker } = breakerWithLog();
    for (let i = 0; i < 10; i++) breaker.settle(false, 'none');
    fail(breaker, 2);
    breaker.settle(false, 'none');
    fail(breaker, 1);
    expect(breaker.state).toBe('open');
  });

  it('open: refuses with the rest of the cool-down as Retry-After, then lets exactly halfOpenProbes through', () => {
    const { clock, breaker, transitions } = breakerWithLog();
    fail(breaker, 3);
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
    fail(breaker, 3);
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
});
