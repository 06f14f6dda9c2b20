import type net from 'node:net';
import type { AddressInfo } from 'node:net';

/** Listens on a free loopback port; resolves with the server's http:// base URL. */
export function listenOnLoopback(server: net.Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}
