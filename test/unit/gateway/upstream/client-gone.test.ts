import http from 'node:http';
import { Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { ManualClock } from '../../../../src/shared/clock';
import type { ForwardHandlers, Forwarder, UpstreamRequest } from '../../../../src/gateway/upstream/forward-contract';
import { UpstreamGuard } from '../../../../src/gateway/upstream/upstream-guard';
import { afterRequestIsOver } from '../../../../src/gateway/upstream/upstream-hold';

/**
 * Issue 48: a request whose client left keeps its places (the guard's, and the maxInFlight slot
 * the response holds) until the forwarder says its upstream request is gone, not merely until the
 * client's response closes.
 */

/** An inner forwarder whose requests are gone only when the test says so (an abort that takes a moment). */
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

function exchange(tenant: string) {
  const req = new http.IncomingMessage(new Socket());
  req.complete = true;
  const res = new http.ServerResponse(req);
  res.assignSocket(new Duplex({ write: (_chunk, _encoding, done) => done(), read() {} }) as Socket);
  const upstream: UpstreamRequest = {
    method: 'GET',
    path: '/v1/pets',
    headers: {},
    client: req,
    receivedAt: process.hrtime.bigint(),
    tenant,
  };
  const failures: string[] = [];
  const handlers: ForwardHandlers = { onFailure: (failure) => failures.push(failure.reason) };
  /** Its maxInFlight slot, as limit-key.ts holds it. */
  let slotFreed = false;
  afterRequestIsOver(res, () => (slotFreed = true));
  return { res, upstream, handlers, failures, slotFreed: () => slotFreed };
}

function setUp() {
  const { forwarder, calls } = innerForwarder();
  const guard = new UpstreamGuard(forwarder, {
    target: 'http://127.0.0.1:1',
    timeoutMs: 1000,
    maxSockets: 1,
    maxPending: 4,
    clock: new ManualClock(Date.UTC(2026, 2, 10, 12)),
  });
  return { guard, calls };
}

describe('a client gone while its request is at the inventory', () => {
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask', 'setImmediate'] }));
  afterEach(() => jest.useRealTimers());

  it('abandons the upstream request at once; its place and its slot come back only once that request is gone', () => {
    const { guard, calls } = setUp();
    const leaving = exchange('a');
    guard.forward(leaving.upstream, leaving.res, leaving.handlers);
    const waiting = exchange('b');
    guard.forward(waiting.upstream, waiting.res, waiting.handlers);
    expect(calls).toHaveLength(1);

    leaving.res.emit('close');
    expect(calls[0]!.abandon).toHaveBeenCalledTimes(1);
    // The pool connection is not free yet: nothing more is sent, nothing given back.
    expect(guard.inFlight()).toBe(2);
    expect(calls).toHaveLength(1);
    expect(leaving.slotFreed()).toBe(false);

    calls[0]!.handlers.onGone!();
    expect(leaving.slotFreed()).toBe(true);
    expect(guard.inFlight()).toBe(1);
    // The place went to the one waiting; a later word of the gone request changes nothing.
    expect(calls).toHaveLength(2);
    calls[0]!.handlers.onGone!();
    calls[0]!.handlers.onFailure({ code: 'upstream_unavailable', reason: 'reset', message: 'cut' });
    expect(guard.inFlight()).toBe(1);
    expect(leaving.failures).toEqual([]);
  });

  it('the deadline passing while the abort is under way answers 504 at once and still waits for the request to be gone', () => {
    const { guard, calls } = setUp();
    const slow = exchange('a');
    guard.forward(slow.upstream, slow.res, slow.handlers);
    jest.advanceTimersByTime(1000);
    expect(slow.failures).toEqual(['timeout']);
    expect(calls[0]!.abandon).toHaveBeenCalledTimes(1);
    expect(guard.inFlight()).toBe(1);
    calls[0]!.handlers.onGone!();
    expect(guard.inFlight()).toBe(0);
  });

  it('a request whose client left before the guard got it is never sent and holds nothing', async () => {
    const { guard, calls } = setUp();
    const gone = exchange('a');
    gone.res.destroy();
    guard.forward(gone.upstream, gone.res, gone.handlers);
    expect(calls).toHaveLength(0);
    expect(guard.inFlight()).toBe(0);
    await new Promise((resolve) => gone.res.once('close', resolve));
    expect(gone.slotFreed()).toBe(true);
  });

  it('a request whose client left while it waited its turn is not sent when the turn comes; the place goes on', () => {
    const { guard, calls } = setUp();
    const first = exchange('a');
    guard.forward(first.upstream, first.res, first.handlers);
    const left = exchange('b');
    guard.forward(left.upstream, left.res, left.handlers);
    const next = exchange('c');
    guard.forward(next.upstream, next.res, next.handlers);
    // Its end is not read yet when the place frees (a closed HTTP/2 session closes its streams one by one).
    left.res.destroy();
    calls[0]!.handlers.onFailure({ code: 'upstream_unavailable', reason: 'invalid_response', message: 'bad' });
    expect(calls).toHaveLength(2);
    expect(guard.inFlight()).toBe(1);
  });

  it('an answer read to its end is a success whose place comes back with the close, without a word from the forwarder', async () => {
    const { guard, calls } = setUp();
    const answered = exchange('a');
    guard.forward(answered.upstream, answered.res, answered.handlers);
    calls[0]!.handlers.onResponse!(200);
    await new Promise((resolve) => answered.res.end(resolve));
    answered.res.emit('close');
    expect(calls[0]!.abandon).not.toHaveBeenCalled();
    expect(guard.inFlight()).toBe(0);
    expect(answered.slotFreed()).toBe(true);
  });
});
