import { constants as cryptoConstants } from 'node:crypto';
import http2 from 'node:http2';
import type { RequestListener } from 'node:http';
import type { Socket } from 'node:net';
import { drainServer } from './close-server';
import type { Config } from '../config';
import type { TlsPair } from './tls-pair';

/**
 * TLS 1.2 suites with forward secrecy and AEAD only (Mozilla's "intermediate" list), strongest
 * first; TLS 1.3's own suites are all AEAD and stay as OpenSSL orders them.
 */
export const MODERN_CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** As on the plain listener (src/shared/http/http-server.ts): slow HTTP/1.1 clients are looked for every second. */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/** What a secure context is made of, at startup and again for each certificate reload. */
export function secureContextOptions(pair: TlsPair) {
  return {
    cert: pair.cert,
    key: pair.key,
    minVersion: 'TLSv1.2' as const,
    maxVersion: 'TLSv1.3' as const,
    ciphers: MODERN_CIPHERS,
    honorCipherOrder: true,
    // No TLS 1.2 renegotiation at all (HTTP/2 forbids it; nothing here asks for a client
    // certificate): Node only caps client-initiated ones at 3 per connection, each a full handshake
    // of server CPU (CVE-2011-1473), and a scanner's verdict on that cap depended on its timing.
    secureOptions: cryptoConstants.SSL_OP_NO_RENEGOTIATION,
  };
}

export interface SecureServer {
  server: http2.Http2SecureServer;
  /** New handshakes use this pair; connections and sessions already open keep theirs. */
  setPair(pair: TlsPair): void;
  /** Stops accepting, lets streams and requests in flight finish for up to `graceMs`, then cuts the rest. */
  close(graceMs: number): Promise<void>;
}

/**
 * The public listener with TLS: HTTP/2 and HTTP/1.1 offered by ALPN (node:http2's compatibility
 * API hands both to the same request listener), with the bounds of the plain listener (header
 * size and time, whole-request time, idle keep-alive, open connections), the TLS handshake
 * within the header time, and HTTP/2's own: streams
 * per session, header fields per request, session memory and idle sessions, and a session that
 * cancels streams in a loop (rapid reset, CVE-2023-44487) is closed: see closeOnRapidReset and
 * test/integration/gateway/h2-rapid-reset.test.ts.
 */
export function createSecureBoundedServer(
  settings: Config['server'],
  limits: Config['http2'],
  pair: TlsPair,
  listener: RequestListener,
): SecureServer {
  const server = http2.createSecureServer(
    {
      ...secureContextOptions(pair),
      // A connection must finish its handshake as fast as its headers must arrive (Node's default
      // is 120 s: a few silent sockets held every slot of maxConnections that long, issue 42).
      handshakeTimeout: settings.headersTimeoutMs,
      allowHTTP1: true,
      settings: { maxConcurrentStreams: limits.maxConcurrentStreams, maxHeaderListSize: settings.maxHeaderBytes },
      maxHeaderListPairs: limits.maxHeaderListPairs,
      maxSessionMemory: limits.maxSessionMemoryMb,
      // nghttp2's own count of every RST_STREAM a client sends, whatever its code (its default, a
      // burst of 1,000, let NO_ERROR and INTERNAL_ERROR resets through ~1,000 requests a session:
      // issue 42): past it the session gets GOAWAY. closeOnRapidReset below is the second guard.
      streamResetBurst: MAX_CLIENT_RESETS_PER_SECOND,
      streamResetRate: MAX_CLIENT_RESETS_PER_SECOND,
      http1Options: { keepAliveTimeout: settings.keepAliveTimeoutMs },
    },
    listener as never,
  );
  // HTTP/1.1 connections are served by node:http's connection code, which reads these from the
  // server; its check for requests past headersTimeout or requestTimeout runs every
  // connectionsCheckingInterval (read when it starts listening; Node's default is 30 s).
  Object.assign(server, {
    headersTimeout: settings.headersTimeoutMs,
    requestTimeout: settings.requestTimeoutMs,
    maxHeaderSize: settings.maxHeaderBytes,
    keepAliveTimeout: settings.keepAliveTimeoutMs,
    connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
  });
  server.maxConnections = settings.maxConnections;
  // No activity on a connection for this long: an HTTP/2 session is sent GOAWAY, an HTTP/1.1 socket closed.
  server.setTimeout(limits.idleTimeoutMs);
  // As on the plain listener: an expectation other than 100-continue is ignored, not answered 417.
  server.on('checkExpectation', listener as never);
  // CONNECT over HTTP/2 reaches the request listener (it answers with the Error body and
  // X-Request-Id) instead of Node's bare 405. Over HTTP/1.1 this event hands over the socket
  // itself: closed, as node:http does without a listener (no tunnel is offered).
  server.on('connect', (req: unknown, resOrSocket: unknown) => {
    if (resOrSocket instanceof http2.Http2ServerResponse)
      (listener as (req: unknown, res: unknown) => void)(req, resOrSocket);
    else (resOrSocket as Socket).destroy();
  });
  const connections = trackConnections(server);
  return {
    server,
    setPair: (next) => server.setSecureContext(secureContextOptions(next)),
    close: (graceMs) => closeSecureServer(server, connections, graceMs),
  };
}

interface Connections {
  sockets: Set<Socket>;
  sessions: Set<http2.ServerHttp2Session>;
}

function trackConnections(server: http2.Http2SecureServer): Connections {
  const connections: Connections = { sockets: new Set(), sessions: new Set() };
  server.on('secureConnection', (socket: Socket) => {
    connections.sockets.add(socket);
    socket.once('close', () => connections.sockets.delete(socket));
  });
  server.on('session', (session) => {
    connections.sessions.add(session);
    session.once('close', () => connections.sessions.delete(session));
    closeOnRapidReset(session);
  });
  return connections;
}

/** Streams a client may cancel within one second (browsers cancel a few on navigation). */
export const MAX_CLIENT_RESETS_PER_SECOND = 100;

/**
 * Rapid reset (CVE-2023-44487): each stream a client opens starts a request here (authentication,
 * a limiter call, a log line) even when the client cancels it at once, so a client resetting
 * streams in a loop keeps the process busy with requests nobody waits for. A session whose client
 * resets more than MAX_CLIENT_RESETS_PER_SECOND streams in a second (any RST_STREAM code on a stream
 * not answered yet, an error code on any) is sent GOAWAY
 * (ENHANCE_YOUR_CALM) and closed, as nginx and Envoy do; other sessions are not affected.
 */
function closeOnRapidReset(session: http2.ServerHttp2Session): void {
  let windowStartedAt = 0;
  let resets = 0;
  session.on('stream', (stream) => {
    stream.once('close', () => {
      // A client's reset of a stream not yet answered (aborted), whatever its code (NO_ERROR and
      // INTERNAL_ERROR let ~1,000 requests a session through when only CANCEL counted, issue 42),
      // and any reset with an error code even after the answer: the work was done either way.
      if (!stream.aborted && (stream.rstCode === undefined || stream.rstCode === http2.constants.NGHTTP2_NO_ERROR))
        return;
      const now = Date.now();
      if (now - windowStartedAt >= 1000) {
        windowStartedAt = now;
        resets = 0;
      }
      if (++resets <= MAX_CLIENT_RESETS_PER_SECOND || session.destroyed) return;
      // Its last frame a GOAWAY with ENHANCE_YOUR_CALM; streams in flight on it end with it.
      session.destroy(undefined, http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    });
  });
}

function closeSecureServer(server: http2.Http2SecureServer, connections: Connections, graceMs: number): Promise<void> {
  const closeIdle = (server as unknown as { closeIdleConnections?: () => void }).closeIdleConnections?.bind(server);
  const drained = drainServer(server, graceMs, {
    // HTTP/1.1: each keep-alive connection is ended as soon as it goes idle.
    closeIdle: () => closeIdle?.(),
    cutAll: () => {
      for (const session of connections.sessions) session.destroy();
      for (const socket of connections.sockets) socket.destroy();
    },
  });
  // HTTP/2: GOAWAY, then the session closes once its open streams have finished.
  for (const session of connections.sessions) session.close();
  return drained;
}
