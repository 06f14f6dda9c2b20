import type { AddressInfo, Server } from 'node:net';

/** Listens and resolves the port actually bound (0 asks for any free one). */
export async function listen(server: Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
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
