import http from 'node:http';
import type net from 'node:net';
import {
  FORWARDERS,
  closeServer,
  send,
  startContractProxy,
  type ClientResult,
  type ContractProxy,
} from './forwarder-kit';
import { listenOnLoopback } from '../../support/loopback';
import { eventually } from '../../support/eventually';

/**
 * One pool event among healthy traffic (issue 48, item 6): an inventory that drops every
 * keep-alive connection the gateway holds at once, while requests are on them, then answers as
 * before. A GET whose pooled connection was cut before its answer is sent once more on a new
 * connection; the event is no outage, so the circuit stays closed and every client gets its 200.
 * The breaker is the product's default (DEFAULT_CIRCUIT_BREAKER). Before the fix the http-proxy
 * forwarder's retry went through its keep-alive agent again and met another cut connection: 15 GETs
 * got 502, "5 failures in a row" opened the circuit, and every later request got 503.
 */

/** Requests sent at once through the proxy, as the bench's wrk -c32. */
const CONCURRENCY = 32;
/** Upstream requests before the pool event: past the warm-up (below), with traffic in full flow. */
const RESET_AT = 100;
/**
 * Requests on pooled connections when the event cuts them all: half the pool. The other half is
 * idle and cut too, which is what a retry through the pool would meet before the pool has noticed.
 */
const CUT_IN_FLIGHT = CONCURRENCY / 2;
/** Client requests in all: as many again after the event, on the connections the pool opens anew. */
const TOTAL = 2 * RESET_AT;

interface PoolResettingUpstream {
  url: string;
  received: number;
  /** Connections cut by the one pool event (every one open at that moment). */
  cut: number;
  /** Requests on those connections the upstream had read and not answered when it cut them. */
  cutInFlight: number;
  close(): Promise<void>;
}

/**
 * A healthy fixed-answer upstream that keeps idle connections for a minute, except for two moments.
 * It first holds requests until CONCURRENCY are held, so that the pool has that many connections.
 * Then one pool event: from its RESET_AT-th request on it holds what arrives, and once it holds
 * CUT_IN_FLIGHT requests it resets every connection it has: those holding a request at once,
 * unanswered, the idle ones on its next turn, and a request that arrives on one of them in between
 * is reset too, as a connection the server has already closed would be.
 */
async function startPoolResettingUpstream(): Promise<PoolResettingUpstream> {
  const sockets = new Set<net.Socket>();
  const doomed = new Set<net.Socket>();
  let held: Array<{ req: http.IncomingMessage; res: http.ServerResponse }> = [];
  const answer = (res: http.ServerResponse) => res.writeHead(200, { 'content-type': 'application/json' }).end('[]');
  const upstream: PoolResettingUpstream = { url: '', received: 0, cut: 0, cutInFlight: 0, close: async () => {} };
  let warm = false;
  const server = http.createServer((req, res) => {
    req.resume();
    if (doomed.has(req.socket)) {
      req.socket.resetAndDestroy();
      return;
    }
    upstream.received++;
    if (!warm) {
      held.push({ req, res });
      if (held.length < CONCURRENCY) return;
      warm = true;
      for (const request of held) answer(request.res);
      held = [];
      return;
    }
    if (upstream.received < RESET_AT || upstream.cut > 0) return void answer(res);
    held.push({ req, res });
    if (held.length < CUT_IN_FLIGHT) return;
    upstream.cut = sockets.size;
    upstream.cutInFlight = held.length;
    for (const socket of sockets) doomed.add(socket);
    for (const request of held) request.req.socket.resetAndDestroy();
    setImmediate(() => {
      for (const socket of doomed) socket.resetAndDestroy();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  upstream.url = await listenOnLoopback(server);
  upstream.close = () => closeServer(server, sockets);
  return upstream;
}

function countBy(items: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[item] = (counts[item] ?? 0) + 1;
  return counts;
}

describe.each(FORWARDERS)('every pooled connection reset at once, forwarder %s', (_kind, create) => {
  let upstream: PoolResettingUpstream;
  let proxy: ContractProxy;
  const transitions: string[] = [];

  beforeEach(async () => {
    transitions.length = 0;
    upstream = await startPoolResettingUpstream();
    proxy = await startContractProxy(create, upstream.url, {
      // Room for every client at once, the guard's reserve for newcomers aside (upstream-guard.ts).
      maxSockets: 2 * CONCURRENCY,
      onCircuitChange: (to, from, why) => transitions.push(`${from}->${to} (${why})`),
    });
  });
  afterEach(async () => {
    await proxy.close();
    await upstream.close();
  });

  it(`${CONCURRENCY} clients at once: the GETs cut by the event are retried on new connections and get 200; the circuit stays closed`, async () => {
    const answers: ClientResult[] = [];
    let sent = 0;
    const client = async () => {
      while (sent < TOTAL) {
        sent++;
        answers.push(await send(`${proxy.url}/v1/pets`));
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, client));
    // The premise: the event came among the traffic, with requests on the pooled connections it cut.
    expect({ cutInFlight: upstream.cutInFlight, everyConnectionCut: upstream.cut >= CUT_IN_FLIGHT }).toEqual({
      cutInFlight: CUT_IN_FLIGHT,
      everyConnectionCut: true,
    });
    expect({
      statuses: countBy(answers.map((answer) => String(answer.status))),
      failures: countBy(proxy.failures.map((failure) => failure.reason)),
      transitions,
    }).toEqual({ statuses: { 200: TOTAL }, failures: {}, transitions: [] });
    expect(proxy.forwarder.circuitState()).toBe('closed');
    // Each request cut was sent once more, on a connection opened after the event (a request that
    // reached a cut connection just after it, on a loaded machine, is one more).
    expect(upstream.received - TOTAL).toBeGreaterThanOrEqual(CUT_IN_FLIGHT);
    await eventually(() => proxy.forwarder.inFlight() === 0, { what: 'every request released' });
  });
});
