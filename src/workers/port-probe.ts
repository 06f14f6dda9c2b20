import net from 'node:net';

/**
 * Binds each port once without SO_REUSEPORT and lets it go. The workers bind their own sockets
 * with SO_REUSEPORT, which would quietly share a port with another process that did the same (a
 * second gateway started on the same port); a plain bind fails with EADDRINUSE whatever holds the
 * port, so startup stops with one line as with one process. Port 0 is the cluster's to pick.
 */
export async function assertPortsFree(ports: ReadonlyArray<{ port: number; host: string }>): Promise<void> {
  for (const { port, host } of ports) {
    if (port === 0) continue;
    await new Promise<void>((resolve, reject) => {
      const probe = net.createServer();
      probe.once('error', reject);
      probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
    });
  }
}
