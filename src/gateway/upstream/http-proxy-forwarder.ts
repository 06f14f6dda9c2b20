import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createProxyMiddleware } from 'http-proxy-middleware';
import type { ForwardHandlers, Forwarder, ForwarderSettings, GuardedForwarder } from './forward-contract';
import { classifyUpstreamError, TIMEOUT_CODE } from './upstream-failure';
import { isHopByHopResponseHeader } from './upstream-headers';
import { guardForwarder } from './upstream-guard';

function pendingInAgent(agent: http.Agent): number {
  let queued = 0;
  for (const requests of Object.values(agent.requests)) queued += requests?.length ?? 0;
  return queued;
}

interface InFlight {
  handlers: ForwardHandlers;
  upstreamRequest?: http.ClientRequest;
  abandoned: boolean;
}

const inFlightOf = new WeakMap<IncomingMessage, InFlight>();

/**
 * One failure per request: a response cut mid-body reaches httpxy's error event and the upstream
 * response's close alike.
 */
function reportOnce(inFlight: InFlight, err: NodeJS.ErrnoException): void {
  if (inFlight.abandoned) return;
  inFlight.abandoned = true;
  inFlight.handlers.onFailure(classifyUpstreamError(err));
}

/**
 * http-proxy-middleware, created once, with a keep-alive agent. The caller has already rewritten
 * the request headers; this only moves bytes and maps failures.
 */
export function createHttpProxyForwarder(settings: ForwarderSettings): GuardedForwarder {
  return guardForwarder(createHttpProxyExchange(settings), settings);
}

/** The forwarder proper, without the guard: its timeout starts once the agent has given it a socket. */
function createHttpProxyExchange(settings: ForwarderSettings): Forwarder {
  const agent = new http.Agent({ keepAlive: true, maxSockets: settings.maxSockets, keepAliveMsecs: 1000 });
  const proxy = createProxyMiddleware<IncomingMessage, ServerResponse>({
    target: settings.target,
    changeOrigin: true,
    xfwd: false,
    agent,
    on: {
      proxyReq(proxyReq, req) {
        const inFlight = inFlightOf.get(req);
        if (inFlight) inFlight.upstreamRequest = proxyReq;
        proxyReq.setTimeout(settings.timeoutMs, () => {
          const err: NodeJS.ErrnoException = new Error('upstream timeout');
          err.code = TIMEOUT_CODE;
          proxyReq.destroy(err);
        });
        // Ahead of httpxy's own listener, which destroys the client's response when the upstream's
        // is cut: seen after that, the cut would look like a client that went away.
        proxyReq.prependOnceListener('response', (upstreamRes) => {
          inFlight?.handlers.onResponse?.(upstreamRes.statusCode ?? 0);
          // http-proxy only pipes the answer: a connection cut mid-body would leave the client waiting.
          upstreamRes.once('close', () => {
            if (upstreamRes.complete || !inFlight) return;
            const err: NodeJS.ErrnoException = new Error('upstream closed the connection mid-response');
            err.code = 'ECONNRESET';
            reportOnce(inFlight, err);
          });
        });
      },
      proxyRes(upstreamRes) {
        for (const name of Object.keys(upstreamRes.headers)) {
          if (isHopByHopResponseHeader(name)) delete upstreamRes.headers[name];
        }
      },
      error(err, req) {
        const inFlight = inFlightOf.get(req as IncomingMessage);
        inFlightOf.delete(req as IncomingMessage);
        if (inFlight) reportOnce(inFlight, err as NodeJS.ErrnoException);
      },
    },
  });

  return {
    forward(req, res, handlers) {
      const inFlight: InFlight = { handlers, abandoned: false };
      inFlightOf.set(req, inFlight);
      // A client gone before the answer ends frees the upstream request (http-proxy only notices an
      // unfinished request body, not a closed response).
      res.once('close', () => {
        if (res.writableFinished || inFlight.abandoned) return;
        inFlight.abandoned = true;
        inFlight.upstreamRequest?.destroy();
      });
      void proxy(req, res, (err?: unknown) => {
        handlers.onFailure(classifyUpstreamError((err ?? new Error('proxy failed')) as NodeJS.ErrnoException));
      });
      return () => {
        inFlight.abandoned = true;
        inFlight.upstreamRequest?.destroy();
      };
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
    },
  };
}
