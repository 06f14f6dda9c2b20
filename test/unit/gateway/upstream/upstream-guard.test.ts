import http from 'node:http';
import { Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { ManualClock } from '../../../../src/shared/clock';
import type {
  ForwardHandlers,
  Forwarder,
  UpstreamFailure,
  UpstreamRequest,
} from '../../../../src/gateway/upstream/forward-contract';
import { UpstreamGuard } from '../../../../src/gateway/upstream/upstream-guard';

/**
 * The inner forwarder: keeps what it was handed; the test answers through the handlers. Abandoned,
 * its request is gone at once, as undici's abort is.
 */
function innerForwarder() {
  const calls: Array<{ handlers: ForwardHandlers; abandon: jest.Mock }> = [];
  const forwarder: Forwarder = {
    forward(_request, _res, handlers) {
      const abandon = jest.fn(() => handlers.onGone?.());
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
  const upstream: UpstreamRequest = {
    method: 'GET',
    path: '/v1/pets',
    headers: {},
    client: req,
    receivedAt: process.hrtime.bigint(),
  };
  const handlers: ForwardHandlers = {
    onFailure: (failure) => failures.push(failure),
    onResponse: (status) => statuses.push(status),
  };
  return { upstream, res, handlers, failures, statuses };
}

/** `minimumRequests`: requests settled before the breaker judges, of which half failing opens it (`failureRatio`: 0.5 unless given). */
function setUp(
  options: { maxSockets?: number; maxPending?: number; minimumRequests?: number; failureRatio?: number } = {},
) {
  const { forwarder, calls } = innerForwarder();
  const clock = new ManualClock(Date.UTC(2026, 2, 10, 12));
  const transitions: string[] = [];
  const guard = new UpstreamGuard(forwarder, {
    target: 'http://127.0.0.1:1',
    timeoutMs: 1000,
    maxSockets: options.maxSockets ?? 2,
    maxPending: options.maxPending ?? 0,
    circuitBreaker: {
      failureRatio: options.failureRatio ?? 0.5,
      minimumRequests: options.minimumRequests ?? 2,
      windowMs: 10_000,
      cooldownMs: 5000,
      halfOpenProbes: 1,
    },
    clock,
    onCircuitChange: (to) => transitions.push(to),
  });
  const send = (bodyComplete = true, tenant?: string, method = 'GET') => {
    const callsBefore = calls.length;
    const sent = exchange(bodyComplete);
    sent.upstream.tenant = tenant;
    sent.upstream.method = method;
    const abandon = guard.forward(sent.upstream, sent.res, sent.handlers);
    const inner = calls.length > callsBefore ? calls.at(-1) : undefined;
    return { ...sent, abandon, inner };
  };
  return { guard, calls, clock, transitions, send };
}

const RESET: UpstreamFailure = {
  code: 'upstream_unavailable',
  reason: 'reset',
  message: 'The inventory service closed the connection.',
};
/** A failure no retry applies to (a reset of a GET is sent once more: see the retry tests). */
const INVALID: UpstreamFailure = {
  code: 'upstream_unavailable',
  reason: 'invalid_response',
  message: 'The inventory service sent an invalid response.',
};
const REFUSED: UpstreamFailure = {
  code: 'upstream_unavailable',
  reason: 'refused',
  message: 'The inventory service is unreachable.',
};

describe('UpstreamGuard', () => {
  beforeEach(() => jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask', 'setImmediate'] }));
  afterEach(() => jest.useRealTimers());

  it('holds a slot per request from sending to its end, and refuses 503 overloaded past maxSockets + maxPending without sending', () => {
    const { guard, calls, send } = setUp({ maxSockets: 1, maxPending: 1 });
    const first = send();
    send();
    expect(guard.inFlight()).toBe(2);
    // The second waits in the guard, not in the pool.
    expect(calls).toHaveLength(1);
    const third = send();
    expect(calls).toHaveLength(1);
    expect(third.failures).toEqual([
      expect.objectContaining({ reason: 'overloaded', status: 503, headers: { 'Retry-After': '1' } }),
    ]);
    first.inner!.handlers.onResponse!(200);
    expect(first.statuses).toEqual([200]);
    first.res.emit('close');
    expect(guard.inFlight()).toBe(1);
    // Its place went to the one waiting.
    expect(calls).toHaveLength(2);
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
    // Past the head, nothing is retried.
    expect(sent.failures).toEqual([RESET]);
  });

  it('enough failures open the circuit: then 503 circuit_open with Retry-After, nothing sent', () => {
    const { calls, transitions, send } = setUp({ minimumRequests: 2 });
    for (let i = 0; i < 2; i++) send().inner!.handlers.onFailure(INVALID);
    expect(transitions).toEqual(['open']);
    const refused = send();
    expect(calls).toHaveLength(2);
    expect(refused.failures).toEqual([
      expect.objectContaining({ reason: 'circuit_open', status: 503, headers: { 'Retry-After': '5' } }),
    ]);
  });

  it('a deadline passed while the client was still sending its body says nothing about the upstream', () => {
    const { transitions, send } = setUp({ minimumRequests: 1 });
    const slowClient = send(false);
    jest.advanceTimersByTime(1000);
    expect(slowClient.failures).toEqual([expect.objectContaining({ reason: 'timeout' })]);
    expect(transitions).toEqual([]);
    send(true);
    jest.advanceTimersByTime(1000);
    expect(transitions).toEqual(['open']);
  });

  it('an answered request counts as a success; one abandoned by the gateway counts for nothing', async () => {
    const { guard, transitions, send } = setUp({ minimumRequests: 2, failureRatio: 1 });
    send().inner!.handlers.onFailure(INVALID);
    const answered = send();
    answered.inner!.handlers.onResponse!(200);
    await new Promise((resolve) => answered.res.end(resolve));
    expect(answered.res.writableFinished).toBe(true);
    answered.res.emit('close');
    // The success is in the window: with failureRatio 1, one more failure does not open the circuit.
    send().inner!.handlers.onFailure(INVALID);
    expect(transitions).toEqual([]);
    const abandoned = send();
    abandoned.abandon();
    expect(abandoned.inner!.abandon).toHaveBeenCalledTimes(1);
    expect(abandoned.failures).toEqual([]);
    expect(guard.inFlight()).toBe(0);
    expect(transitions).toEqual([]);
  });

  it("reports the inner forwarder's stats and closes it", async () => {
    const { guard, send } = setUp();
    send();
    expect(guard.stats()).toEqual({ activeRequests: 1, openConnections: 1 });
    expect(guard.circuitState()).toBe('closed');
    await guard.close();
  });

  it('at the bound, a key holding fewer takes the place of a waiting request of the key holding the most', () => {
    const { guard, calls, send } = setUp({ maxSockets: 2, maxPending: 2 });
    const loud = [send(true, 'loud'), send(true, 'loud'), send(true, 'loud'), send(true, 'loud')];
    expect(calls).toHaveLength(2);
    // The loud key's own newcomer is the one refused.
    expect(send(true, 'loud').failures).toEqual([expect.objectContaining({ reason: 'overloaded' })]);
    const quiet = send(true, 'quiet');
    expect(quiet.failures).toEqual([]);
    // The oldest waiting loud request gave its place, answered 503 overloaded without being sent.
    expect(loud[2]!.failures).toEqual([expect.objectContaining({ reason: 'overloaded', status: 503 })]);
    expect(guard.inFlight()).toBe(4);
    // The next free connection goes to the quiet key, though a loud request waited longer.
    loud[0]!.inner!.handlers.onFailure(INVALID);
    expect(calls).toHaveLength(3);
    calls[2]!.handlers.onResponse!(200);
    expect(quiet.statuses).toEqual([200]);
  });

  it('a waiting request whose client hangs up leaves the queue; its deadline answers 504 without a word to the breaker', () => {
    const { guard, calls, transitions, send } = setUp({ maxSockets: 1, maxPending: 2, minimumRequests: 1 });
    const answering = send(true, 'a');
    answering.inner!.handlers.onResponse!(200);
    const gone = send(true, 'b');
    const late = send(true, 'c');
    gone.res.emit('close');
    expect(guard.inFlight()).toBe(2);
    jest.advanceTimersByTime(1000);
    expect(late.failures).toEqual([expect.objectContaining({ code: 'upstream_timeout' })]);
    // Never sent: nothing to judge the upstream by.
    expect(transitions).toEqual([]);
    expect(calls).toHaveLength(1);
    expect(guard.inFlight()).toBe(1);
  });

  it('a refused connection answers every waiting request 502 at once', () => {
    const { guard, send } = setUp({ maxSockets: 1, maxPending: 3, minimumRequests: 10 });
    const first = send(true, 'a');
    const waiting = [send(true, 'a'), send(true, 'b'), send(true, 'c')];
    first.inner!.handlers.onFailure(REFUSED);
    for (const request of [first, ...waiting]) expect(request.failures).toEqual([REFUSED]);
    expect(guard.inFlight()).toBe(0);
  });

  it('a GET or HEAD reset before its answer is sent once more on a fresh connection, and the reset is not counted', () => {
    const { calls, transitions, send } = setUp({ minimumRequests: 1 });
    for (const method of ['GET', 'HEAD']) {
      const sent = send(true, 'k', method);
      sent.inner!.handlers.onFailure(RESET);
      expect(sent.failures).toEqual([]);
      expect(transitions).toEqual([]);
      const retry = calls.at(-1)!;
      expect(retry).not.toBe(sent.inner);
      retry.handlers.onResponse!(200);
      expect(sent.statuses).toEqual([200]);
      // The first attempt's late word is dropped.
      sent.inner!.handlers.onResponse!(500);
      expect(sent.statuses).toEqual([200]);
    }
  });

  it('resets of one pool event count once: 32 POSTs cut at once do not open it; the failed retry of a GET counts on its own', () => {
    const { calls, transitions, send, clock } = setUp({ maxSockets: 64, minimumRequests: 2 });
    const posts = Array.from({ length: 32 }, () => send(true, 'k', 'POST'));
    posts.forEach((post, i) => {
      // Within a few milliseconds, as the bench's 32 resets came within 5 ms.
      if (i % 8 === 7) clock.advance(1);
      post.inner!.handlers.onFailure(RESET);
    });
    for (const post of posts) expect(post.failures).toEqual([RESET]);
    expect(transitions).toEqual([]);
    // A GET reset on its pooled connection is sent again on a fresh one; that one's reset is no pool event.
    const get = send(true, 'k', 'GET');
    get.inner!.handlers.onFailure(RESET);
    calls.at(-1)!.handlers.onFailure(RESET);
    expect(get.failures).toEqual([RESET]);
    expect(transitions).toEqual(['open']);
  });

  it('the retry happens once; a POST is never retried', () => {
    const { calls, send } = setUp({ minimumRequests: 5 });
    const get = send(true, 'k', 'GET');
    get.inner!.handlers.onFailure(RESET);
    calls.at(-1)!.handlers.onFailure(RESET);
    expect(get.failures).toEqual([RESET]);
    const callsBefore = calls.length;
    const post = send(true, 'k', 'POST');
    post.inner!.handlers.onFailure(RESET);
    expect(post.failures).toEqual([RESET]);
    expect(calls).toHaveLength(callsBefore + 1);
  });
});
