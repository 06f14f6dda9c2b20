import http from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { PassThrough } from 'node:stream';
import { createProxyMiddleware } from 'http-proxy-middleware';
import type {
  ForwardHandlers,
  Forwarder,
  ForwarderSettings,
  GuardedForwarder,
  UpstreamRequest,
} from './forward-contract';
import { hasBody } from './request-body';
import { classifyUpstreamError, TIMEOUT_CODE } from './upstream-failure';
import { isHopByHopResponseHeader } from './upstream-headers';
import { guardForwarder } from './upstream-guard';
import { markCutOff } from '../cut-off';

function pendingInAgent(agent: http.Agent): number {
  let queued = 0;
  for (const requests of Object.values(agent.requests)) queued += requests?.length ?? 0;
  return queued;
}

/**
 * One request through http-proxy: its upstream request once http-proxy has made it, whether it is
 * over on our side, and whether it is gone from the inventory (the guard's place waits for that).
 */
class InFlight {
  upstreamRequest?: http.ClientRequest;
  upstreamResponse?: IncomingMessage;
  /** Over on our side: a failure reported, or abandoned (client gone, deadline, body too large). */
  abandoned = false;
  private gone = false;
  /** Called once the request is gone: a retry's first attempt then stops listening to the client's response. */
  onceGone?: () => void;

  constructor(readonly handlers: ForwardHandlers) {}

  /**
   * http-proxy has made the upstream request and the agent gave it a socket: watched until it
   * closes (answer read to its end, or destroyed); destroyed at once if abandoned meanwhile.
   */
  attach(upstreamRequest: http.ClientRequest): void {
    this.upstreamRequest = upstreamRequest;
    upstreamRequest.once('close', () => this.markGone());
    if (this.abandoned) upstreamRequest.destroy();
  }

  /** Stops the upstream request without reporting a failure; a late answer is dropped with it. */
  abandon(): void {
    this.abandoned = true;
    if (this.upstreamRequest) this.upstreamRequest.destroy();
    // Not given a socket yet, it holds no connection (and attach destroys it if it ever gets one);
    // destroyed meanwhile by http-proxy itself, no close of it would ever reach us.
    else this.markGone();
  }

  /**
   * The client's response closed: unless the upstream's answer was read to its end, the upstream
   * request is abandoned. Not `res.writableFinished`, which an HTTP/2 stream reset sets too (issue
   * 48: the cancelled stream's request went on, and its late answer, piped into a closed stream,
   * held the pool connection for good).
   */
  clientClosed(): void {
    if (this.gone || this.upstreamResponse?.complete) return;
    this.abandon();
  }

  /**
   * The answer's body waited for the client longer than the upstream timeout (it stopped reading,
   * or its stream was reset under a paused pipe): cut off, not an upstream failure.
   */
  clientStoppedReading(res: ServerResponse): void {
    markCutOff(res, 'client stopped reading');
    this.abandon();
    res.destroy();
  }

  /**
   * One failure per request: a response cut mid-body reaches httpxy's error event and the upstream
   * response's close alike.
   */
  fail(err: NodeJS.ErrnoException): void {
    if (!this.abandoned) {
      this.abandoned = true;
      this.handlers.onFailure(classifyUpstreamError(err));
    }
    // Failed before http-proxy handed its request over: no close of it will say it is gone.
    if (!this.upstreamRequest) this.markGone();
  }

  private markGone(): void {
    if (this.gone) return;
    this.gone = true;
    this.onceGone?.();
    this.handlers.onGone?.();
  }
}

/**
 * The upstream request as http-proxy-middleware reads a request: the method, target and headers of
 * the UpstreamRequest, the client's protocol version and socket, over a stream of the client's body.
 * http-proxy builds the upstream request from what it finds on the request it is handed; this is
 * handed to it so that the client's own request is never rewritten.
 */
class ProxiedRequest extends PassThrough {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly httpVersion: string;
  readonly httpVersionMajor: number;
  readonly httpVersionMinor: number;
  /** http-proxy reads the socket for the listening server and the client's address. */
  readonly socket: IncomingMessage['socket'];
  readonly connection: IncomingMessage['socket'];

  constructor(
    upstream: UpstreamRequest,
    readonly inFlight: InFlight,
  ) {
    super();
    const client = upstream.client;
    this.method = upstream.method;
    this.url = upstream.path;
    this.headers = upstream.headers;
    this.httpVersion = client.httpVersion;
    this.httpVersionMajor = client.httpVersionMajor;
    this.httpVersionMinor = client.httpVersionMinor;
    this.socket = client.socket;
    this.connection = client.socket;
    // The client's errors (an upload cut off) reach http-proxy as they did on the client's request.
    client.on('error', (err) => this.destroy(err));
    if (hasBody(client)) client.pipe(this);
    else this.end();
  }
}

/**
 * http-proxy-middleware, created once, with a keep-alive agent. The UpstreamRequest says what to
 * send; this only moves bytes and maps failures.
 */
export function createHttpProxyForwarder(settings: ForwarderSettings): GuardedForwarder {
  return guardForwarder(createHttpProxyExchange(settings), settings);
}

/** The http-proxy middleware through one agent: each request watched from its upstream request on. */
function proxyThrough(settings: ForwarderSettings, through: http.Agent) {
  return createProxyMiddleware<IncomingMessage, ServerResponse>({
    target: settings.target,
    changeOrigin: true,
    xfwd: false,
    agent: through,
    on: {
      proxyReq(proxyReq, req, res) {
        watchUpstreamRequest(settings, proxyReq, (req as unknown as ProxiedRequest).inFlight, res);
      },
      proxyRes(upstreamRes) {
        for (const name of Object.keys(upstreamRes.headers)) {
          if (isHopByHopResponseHeader(name)) delete upstreamRes.headers[name];
        }
      },
      error(err, req) {
        (req as unknown as ProxiedRequest).inFlight.fail(err as NodeJS.ErrnoException);
      },
    },
  });
}

/** The upstream request of one forward: its timeout, its answer's head, and an answer cut mid-body. */
function watchUpstreamRequest(
  settings: ForwarderSettings,
  proxyReq: http.ClientRequest,
  inFlight: InFlight,
  res: ServerResponse,
): void {
  inFlight.attach(proxyReq);
  proxyReq.setTimeout(settings.timeoutMs, () => {
    // The answer paused for a client that does not read it: the client's doing, not the upstream's.
    if (inFlight.upstreamResponse?.isPaused()) return inFlight.clientStoppedReading(res);
    const err: NodeJS.ErrnoException = new Error('upstream timeout');
    err.code = TIMEOUT_CODE;
    proxyReq.destroy(err);
  });
  // Ahead of httpxy's own listener, which destroys the client's response when the upstream's
  // is cut: seen after that, the cut would look like a client that went away.
  proxyReq.prependOnceListener('response', (upstreamRes) => {
    inFlight.upstreamResponse = upstreamRes;
    inFlight.handlers.onResponse?.(upstreamRes.statusCode ?? 0);
    // http-proxy only pipes the answer: a connection cut mid-body would leave the client waiting.
    upstreamRes.once('close', () => {
      if (upstreamRes.complete) return;
      const err: NodeJS.ErrnoException = new Error('upstream closed the connection mid-response');
      err.code = 'ECONNRESET';
      inFlight.fail(err);
    });
  });
}

/** The forwarder proper, without the guard: its timeout starts once the agent has given it a socket. */
function createHttpProxyExchange(settings: ForwarderSettings): Forwarder {
  const agent = new http.Agent({ keepAlive: true, maxSockets: settings.maxSockets, keepAliveMsecs: 1000 });
  /**
   * Retries on a new connection (AttemptOptions.freshConnection): one socket per request, closed
   * once it has answered. Not the pool's agent: when the inventory closed every pooled connection
   * at once, its other idle sockets are as dead as the one that failed, and not yet known to be.
   */
  const freshAgent = new http.Agent({ keepAlive: false });
  const proxy = proxyThrough(settings, agent);
  const freshProxy = proxyThrough(settings, freshAgent);

  return {
    forward(upstream, res, handlers, options) {
      const inFlight = new InFlight(handlers);
      const proxied = new ProxiedRequest(upstream, inFlight);
      // A client gone before the answer ends frees the upstream request (http-proxy only notices an
      // unfinished request body, and an HTTP/2 stream reset looks finished to it).
      const onClientClose = () => inFlight.clientClosed();
      res.once('close', onClientClose);
      // Gone, it has nothing left to abandon: a retried GET's response then carries one such listener, not two.
      inFlight.onceGone = () => res.off('close', onClientClose);
      void (options?.freshConnection ? freshProxy : proxy)(
        proxied as unknown as IncomingMessage,
        res,
        (err?: unknown) => {
          inFlight.fail((err ?? new Error('proxy failed')) as NodeJS.ErrnoException);
        },
      );
      return () => inFlight.abandon();
    },
    stats() {
      let activeRequests = 0;
      let idle = 0;
      for (const sockets of Object.values(agent.sockets)) activeRequests += sockets?.length ?? 0;
      for (const sockets of Object.values(agent.freeSockets)) idle += sockets?.length ?? 0;
      return { activeRequests: activeRequests + pendingInAgent(agent), openConnections: activeRequests + idle };
    },
    close() {
      agent.destroy();
      freshAgent.destroy();
    },
  };
}
