import http from 'node:http';
import { Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { ManualClock } from '../../../../src/shared/clock';
import type { ForwardHandlers, Forwarder, UpstreamFailure, UpstreamRequest } from '../../../../src/gateway/upstream/forward-contract';
import { UpstreamGuard } from '../../../../src/gateway/upstream/upstream-guard';

/** The inner forwarder: keeps what it was handed; the test answers through the handlers. */
function innerForwarder() {
  const calls: Array<{ handlers: ForwardHandlers; abandon: jest.Mock }> = [];
  const forwarder: Forwarder = {
    forward(_request, _res, handlers) {
      const abandon = jest.fn();
      calls.push({ handlers, abandon });
      return abandon;
    },
    stats: () => ({ activeRequests: calls.length, openConnections: 1 }),
    close: jest.fn(),
  };
  return { forwarder, calls };
}

/** A client's request (its body complete or still arriving) and the response to it. */
function exchange(bodyComplete = true) {
  const req = new http.IncomingMessage(new Socket());
  req.complete = bodyComplete;
  const res = new http.ServerResponse(req);
  // A connection that takes whatever is written, so that an answer can finish.
  res.assignSocket(new Duplex({ write: (_chunk, _encoding, done) => done(), read() {} }) as Socket);
  const failures: UpstreamFailure[] = [];
  const statuses: number[] = [];
  const upstream: UpstreamRequest = { method: 'GET', path: '/v1/pets', headers: {}, client: req, receivedAt: process.hrtime.bigint() };
  const handlers: ForwardHandlers = { onFailure: (failure) => failures.push(failure), onResponse: (status) => statuses.push(status) };
  return { upstream, res, handlers, failures, statuses };
}

function setUp(options: { maxSockets?: number; maxPending?: number; consecutiveFailures?: number } = {}) {
  const { forwarder, calls } = innerForwarder();
  const clock = new ManualClock(Date.UTC(2026, 2, 10, 12));
  const transitions: string[] = [];
  const guard = new UpstreamGuard(forwarder, {
    target: 'http://127.0.0.1:1',
    timeoutMs: 1000,
    maxSockets: options.maxSockets ?? 2,
    maxPending: options.maxPending ?? 0,
    circuitBreaker: { consecutiveFailures: options.consecutiveFailures ?? 2, cooldownMs: 5000, halfOpenProbes: 1 },
    clock,
    onCircuitChange: (to) => transitions.push(to),
  });
  const send = (bodyComplete = true) => {
    const sent = exchange(bodyComplete);
    const abandon = guard.forward(sent.upstream, sent.res, sent.handlers);
    return { ...sent, abandon, inner: calls.at(-1) };
  };
  return { guard, calls, clock, transitions, send };
}

const RESET: UpstreamFailure = { code: 'upstream_unavailable', reason: 'reset', message: 'The inventory service closed the connection.' };

describe('UpstreamGuard', () => {
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask', 'setImmediate'] }));
  afterEach(() => jest.useRealTimers());

  it('holds a slot per request from sending to its end, and refuses 503 overloaded past maxSockets + maxPending without sending', () => {
    const { guard, calls, send } = setUp({ maxSockets: 1, maxPending: 1 });
    const first = send();
    send();
    expect(guard.inFlight()).toBe(2);
    const third = send();
    expect(calls).toHaveLength(2);
    expect(third.failures).toEqual([expect.objectContaining({ reason: 'overloaded', status: 503, headers: { 'Retry-After': '1' } })]);
    first.inner!.handlers.onResponse!(200);
    expect(first.statuses).toEqual([200]);
    first.res.emit('close');
    expect(guard.inFlight()).toBe(1);
  });

  it('the deadline answers 504 timeout once, abandons the inner request and drops its late word', () => {
    const { guard, send } = setUp();
    const sent = send();
    jest.advanceTimersByTime(999);
    expect(sent.failures).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(sent.failures).toEqual([expect.objectContaining({ code: 'upstream_timeout', reason: 'timeout' })]);
    expect(sent.inner!.abandon).toHaveBeenCalledTimes(1);
    expect(guard.inFlight()).toBe(0);
    sent.inner!.handlers.onFailure(RESET);
    sent.inner!.handlers.onResponse!(200);
    expect(sent.failures).toHaveLength(1);
    expect(sent.statuses).toEqual([]);
  });

  it('the head stops the deadline; a body cut after it still reaches the caller, once', () => {
    const { send } = setUp();
    const sent = send();
    sent.inner!.handlers.onResponse!(200);
    jest.advanceTimersByTime(5000);
    expect(sent.failures).toEqual([]);
    sent.inner!.handlers.onFailure(RESET);
    sent.inner!.handlers.onFailure(RESET);
    expect(sent.failures).toEqual([RESET]);
  });

  it('failures in a row open the circuit: then 503 circuit_open with Retry-After, nothing sent', () => {
    const { calls, transitions, send } = setUp({ consecutiveFailures: 2 });
    for (let i = 0; i < 2; i++) send().inner!.handlers.onFailure(RESET);
    expect(transitions).toEqual(['open']);
    const refused = send();
    expect(calls).toHaveLength(2);
    expect(refused.failures).toEqual([expect.objectContaining({ reason: 'circuit_open', status: 503, headers: { 'Retry-After': '5' } })]);
  });

  it('a deadline passed while the client was still sending its body says nothing about the upstream', () => {
    const { transitions, send } = setUp({ consecutiveFailures: 1 });
    const slowClient = send(false);
    jest.advanceTimersByTime(1000);
    expect(slowClient.failures).toEqual([expect.objectContaining({ reason: 'timeout' })]);
    expect(transitions).toEqual([]);
    send(true);
    jest.advanceTimersByTime(1000);
    expect(transitions).toEqual(['open']);
  });

  it('an answered request counts as a success; one abandoned by the gateway counts for nothing', async () => {
    const { guard, transitions, send } = setUp({ consecutiveFailures: 2 });
    send().inner!.handlers.onFailure(RESET);
    const answered = send();
    answered.inner!.handlers.onResponse!(200);
    await new Promise((resolve) => answered.res.end(resolve));
    expect(answered.res.writableFinished).toBe(true);
    answered.res.emit('close');
    // The success reset the count: one more failure does not open the circuit.
    send().inner!.handlers.onFailure(RESET);
    expect(transitions).toEqual([]);
    const abandoned = send();
    abandoned.abandon();
    expect(abandoned.inner!.abandon).toHaveBeenCalledTimes(1);
    expect(abandoned.failures).toEqual([]);
    expect(guard.inFlight()).toBe(0);
    expect(transitions).toEqual([]);
  });

  it('reports the inner forwarder\'s stats and closes it', async () => {
    const { guard, send } = setUp();
    send();
    expect(guard.stats()).toEqual({ activeRequests: 1, openConnections: 1 });
    expect(guard.circuitState()).toBe('closed');
    await guard.close();
  });
});
