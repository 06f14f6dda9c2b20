import type http from 'node:http';
import type net from 'node:net';

/** How a listener's connections are ended: those idle now, and at the deadline every one left. */
export interface ConnectionClosers {
  closeIdle(): void;
  cutAll(): void;
}

/**
 * Stops accepting, lets requests in flight finish for up to `graceMs`, then cuts what is left.
 * `server.close()` ends only the connections idle at that instant; a keep-alive connection whose
 * request is answered later would stay open until the deadline, so each one is ended as soon as
 * it goes idle.
 */
export function drainServer(server: net.Server, graceMs: number, connections: ConnectionClosers): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = setTimeout(() => connections.cutAll(), graceMs);
    deadline.unref();
    const sweep = setInterval(() => connections.closeIdle(), 50);
    sweep.unref();
    server.close((err) => {
      clearTimeout(deadline);
      clearInterval(sweep);
      // Closing a server that was not listening is not a failure of the stop.
      if (err && (err as NodeJS.ErrnoException).code !== 'ERR_SERVER_NOT_RUNNING') reject(err);
      else resolve();
    });
    connections.closeIdle();
  });
}

/** drainServer for node:http's own server, which tracks its connections itself. */
export function closeServer(server: http.Server, graceMs: number): Promise<void> {
  return drainServer(server, graceMs, {
    closeIdle: () => server.closeIdleConnections(),
    cutAll: () => server.closeAllConnections(),
  });
}
