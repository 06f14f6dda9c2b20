import http from 'node:http';
import type { Config } from '../config';

/** How often node:http looks for requests past headersTimeout or requestTimeout (its default is 30 s). */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/**
 * A node:http server with the bounds every listener of ours keeps (config `server.*`): header
 * size, the time a client has to send its headers and its whole request, idle keep-alive, and the
 * number of open connections. A slow or stalled client is cut off instead of holding a socket.
 */
export function createBoundedServer(settings: Config['server'], listener: http.RequestListener): http.Server {
  const server = http.createServer(
    {
      maxHeaderSize: settings.maxHeaderBytes,
      headersTimeout: settings.headersTimeoutMs,
      requestTimeout: settings.requestTimeoutMs,
      keepAliveTimeout: settings.keepAliveTimeoutMs,
      connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
    },
    listener,
  );
  // Past it node:http closes a new connection at once, before reading a byte.
  server.maxConnections = settings.maxConnections;
  // An expectation other than 100-continue: node:http would answer a bare 417 of its own, without
  // our Error body or X-Request-Id. RFC 9110 §10.1.1 lets a server ignore it (MAY answer 417), as
  // nginx does, so the request is served like any other and the expectation goes no further.
  server.on('checkExpectation', listener);
  return server;
}
