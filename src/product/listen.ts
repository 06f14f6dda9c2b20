import cluster from 'node:cluster';
import type { AddressInfo, ListenOptions, Server } from 'node:net';

/**
 * Connections the kernel may hold for a listener before the process accepts them. Node's 511 drops
 * the SYNs of a burst past it (the client retries after 1, 3, 7 s): with 3,000 clients arriving at
 * once, answers the gateway gave in 11 s reached them after 16 s. Linux caps it at net.core.somaxconn.
 */
const LISTEN_BACKLOG = 4096;

/**
 * Under WORKERS > 1 each worker binds its own socket to the port with SO_REUSEPORT, and the kernel
 * spreads new connections over the workers' sockets (by a hash of each connection's addresses).
 * Through the cluster's shared socket instead, the supervisor accepted every connection and handed
 * it to a worker over IPC: with clients that open a connection per request, that was work per
 * request in the supervisor (about 250 µs of its CPU and two IPC messages each). Port 0 still goes
 * through the cluster, which gives every worker the same port.
 */
export function listenOptions(port: number, host: string, isClusterWorker: boolean): ListenOptions {
  const ownSocket = isClusterWorker && port !== 0;
  return { port, host, backlog: LISTEN_BACKLOG, ...(ownSocket ? { exclusive: true, reusePort: true } : {}) };
}

/** Listens and resolves the port actually bound (0 asks for any free one). */
export async function listen(server: Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listenOptions(port, host, cluster.isWorker), () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

/** A URL this machine can reach a listener at: a wildcard address is reached on loopback. */
export function localUrl(host: string, port: number, scheme: 'http' | 'https' = 'http'): string {
  const reachable = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `${scheme}://${reachable}:${port}`;
}
