import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { PassThrough } from 'node:stream';
import { Client, Pool, type Dispatcher } from 'undici';
import { hasBody } from './request-body';
import { classifyUpstreamError } from './upstream-failure';
import { isHopByHopResponseHeader } from './upstream-headers';
import type { ForwarderSettings, ForwardHandlers, Forwarder, GuardedForwarder } from './forward-contract';
import { guardForwarder } from './upstream-guard';
import { markCutOff } from '../cut-off';

/**
 * Request headers undici sets itself or refuses (it frames the body and names the host from the
 * pool's origin, as http-proxy-middleware's `changeOrigin` does). `expect` never goes upstream:
 * node:http has already answered `100 Continue` to the client by the time the request is routed.
 */
const REQUEST_HEADERS_UNDICI_OWNS = new Set([
  'host',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'expect',
]);

/** Why the upstream request was stopped on our side; never reported as an upstream failure. */
class ForwardAbandoned extends Error {
  constructor(why: string) {
    super(why);
    this.name = 'ForwardAbandoned';
  }
}

/**
 * One request through undici's dispatch API: the client's body piped up, the answer written to the
 * client as it arrives, with backpressure both ways.
 */
class ForwardExchange implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  /** Set once undici is done with the request: answered, failed, or abandoned and aborted. */
  private settled = false;
  private abandonedBecause: ForwardAbandoned | null = null;
  /** Runs while the answer waits for the client to drain it; past it the client is cut off. */
  private pauseDeadline: NodeJS.Timeout | null = null;
  private readonly resume = () => {
    this.clearPauseDeadline();
    this.controller?.resume();
  };

  constructor(
    private readonly res: ServerResponse,
    private readonly handlers: ForwardHandlers,
    /** The client's body on its way up, when it has one. */
    private readonly body: PassThrough | null,
    /** How long the answer may wait for the client to read it: the upstream timeout. */
    private readonly pauseLimitMs: number,
  ) {}

  /** Stops the upstream request without reporting a failure (body too large, client gone). */
  abandon(why: string): void {
    if (this.settled || this.abandonedBecause) return;
    this.abandonedBecause = new ForwardAbandoned(why);
    this.controller?.abort(this.abandonedBecause);
    this.releaseBody();
  }

  /** Stops reading the client's body for the upstream; the client's request itself stays open. */
  private releaseBody(): void {
    if (this.body && !this.body.writableFinished) this.body.destroy();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abandonedBecause) controller.abort(this.abandonedBecause);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
    statusMessage?: string,
  ): void {
    if (statusCode < 200) return;
    const res = this.res;
    this.handlers.onResponse?.(statusCode);
    try {
      for (const name in headers) {
        if (!isHopByHopResponseHeader(name)) res.setHeader(name, headers[name]!);
      }
      // HTTP/2 has no reason phrase (RFC 9113 §8.3.2): the upstream's is passed on over HTTP/1.1 only.
      if (statusMessage && res.req.httpVersionMajor < 2) res.writeHead(statusCode, statusMessage);
      else res.writeHead(statusCode);
    } catch (err) {
      // A header node:http will not write (a control character, say) is an invalid response.
      const invalid: NodeJS.ErrnoException = new Error(`upstream response header refused: ${(err as Error).message}`);
      invalid.code = 'HPE_INVALID_HEADER_TOKEN';
      controller.abort(invalid);
      return;
    }
    res.on('drain', this.resume);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.res.write(chunk)) return;
    controller.pause();
    // undici's bodyTimeout does not run while paused: without a deadline of our own, a client that
    // stops reading (or a write into a reset HTTP/2 stream, which never drains) holds the
    // connection for good (issue 48).
    this.pauseDeadline ??= setTimeout(this.clientStoppedReading, this.pauseLimitMs).unref();
  }

  /** The answer waited longer than the upstream timeout for the client to read it: cut off, not an upstream failure. */
  private readonly clientStoppedReading = () => {
    this.pauseDeadline = null;
    if (this.settled) return;
    markCutOff(this.res, 'client stopped reading');
    this.abandon('client stopped reading the answer');
    this.res.destroy();
  };

  private clearPauseDeadline(): void {
    if (this.pauseDeadline === null) return;
    clearTimeout(this.pauseDeadline);
    this.pauseDeadline = null;
  }

  onResponseEnd(): void {
    this.settle();
    this.res.end();
    this.handlers.onGone?.();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.settled) return;
    this.settle();
    // Aborted or failed, undici has let go of the request and its connection.
    this.handlers.onGone?.();
    if (this.abandonedBecause) return;
    this.handlers.onFailure(classifyUpstreamError(err as NodeJS.ErrnoException));
  }

  private settle(): void {
    this.settled = true;
    this.clearPauseDeadline();
    this.res.off('drain', this.resume);
    this.releaseBody();
  }

  /**
   * The client's response closed before undici was done: the client went away (its connection
   * closed, its HTTP/2 stream reset or its session closed), or the gateway cut it off. Not
   * `res.writableFinished`, which an HTTP/2 reset sets too (issue 48).
   */
  onClientClosed(): void {
    if (!this.settled) this.abandon('client closed the connection');
  }
}

/** The UpstreamRequest's headers as undici takes them, minus what it owns. */
function headerPairs(incoming: IncomingHttpHeaders): string[] {
  const headers: string[] = [];
  for (const name in incoming) {
    if (REQUEST_HEADERS_UNDICI_OWNS.has(name)) continue;
    const value = incoming[name];
    if (value === undefined) continue;
    if (Array.isArray(value)) {
      for (const item of value) headers.push(name, item);
    } else {
      headers.push(name, value);
    }
  }
  return headers;
}

/**
 * The client's body as undici takes it. An async iterable rather than the stream itself: undici
 * sends an iterable as it comes (chunked unless the client declared a length, as http-proxy does),
 * where a stream that happens to be fully buffered would be re-framed with a Content-Length. And the
 * client's request is piped into a PassThrough of our own, because undici destroys a body stream on
 * abort, and the client's request must stay open for the gateway's own answer (413).
 */
async function* chunksOf(body: PassThrough): AsyncGenerator<Buffer> {
  for await (const chunk of body) yield chunk as Buffer;
}

/**
 * An undici Pool with keep-alive connections to the inventory, created once. Same contract as the
 * http-proxy-middleware forwarder: the UpstreamRequest says what to send; this moves bytes,
 * drops hop-by-hop response headers, and maps failures with classifyUpstreamError.
 */
export function createUndiciForwarder(settings: ForwarderSettings): GuardedForwarder {
  return guardForwarder(createUndiciPool(settings), settings);
}

/**
 * The forwarder proper, without the guard. undici's pool queues past `connections` without a
 * bound, and its headersTimeout starts only once a request is written to a connection: the guard's
 * deadline and bound cover the queue.
 */
function createUndiciPool(settings: ForwarderSettings): Forwarder {
  const target = new URL(settings.target);
  const basePath = target.pathname.replace(/\/+$/, '');
  const connectionOptions = {
    pipelining: 1,
    connectTimeout: settings.timeoutMs,
    headersTimeout: settings.timeoutMs,
    bodyTimeout: settings.timeoutMs,
  };
  const pool = new Pool(target.origin, { ...connectionOptions, connections: settings.maxSockets });
  /** Retries on a new connection (AttemptOptions.freshConnection): a Client of their own, closed once it has answered. */
  const freshConnections = new Set<Client>();
  const freshDispatcher = (): Dispatcher => {
    const client = new Client(target.origin, connectionOptions);
    freshConnections.add(client);
    // close() lets the one request finish, then ends the connection.
    queueMicrotask(() => void client.close().finally(() => freshConnections.delete(client)));
    return client;
  };

  return {
    forward(upstream, res, handlers, options) {
      const body = hasBody(upstream.client) ? new PassThrough() : null;
      const exchange = new ForwardExchange(res, handlers, body, settings.timeoutMs);
      // 'close' comes once: `on` spares the wrapper `once` makes for every request.
      res.on('close', () => exchange.onClientClosed());
      if (body) upstream.client.pipe(body);
      const dispatcher = options?.freshConnection ? freshDispatcher() : pool;
      dispatcher.dispatch(
        {
          path: basePath + upstream.path,
          method: upstream.method,
          headers: headerPairs(upstream.headers),
          // Documented (AsyncIterable is a DispatchOptions body) but missing from undici's types.
          body: body && (chunksOf(body) as unknown as Dispatcher.DispatchOptions['body']),
        },
        exchange,
      );
      return () => exchange.abandon('request abandoned by the gateway');
    },
    stats() {
      const { size, connected } = pool.stats;
      return { activeRequests: size, openConnections: connected };
    },
    async close() {
      await Promise.all([pool.destroy(), ...[...freshConnections].map((client) => client.destroy())]);
    },
  };
}
