import type http from 'node:http';

/**
 * Stops accepting, lets requests in flight finish for up to `graceMs`, then cuts what is left.
 * `server.close()` ends only the connections idle at that instant; a keep-alive connection whose
 * request is answered later would stay open until the deadline, so each one is ended as soon as
 * it goes idle.
 */
export function closeServer(server: http.Server, graceMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = setTimeout(() => server.closeAllConnections(), graceMs);
    deadline.unref();
    const sweep = setInterval(() => server.closeIdleConnections(), 50);
    sweep.unref();
    server.close((err) => {
      clearTimeout(deadline);
      clearInterval(sweep);
      // Closing a server that was not listening is not a failure of the stop.
      if (err && (err as NodeJS.ErrnoException).code !== 'ERR_SERVER_NOT_RUNNING') reject(err);
      else resolve();
    });
    server.closeIdleConnections();
  });
}
