import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createUndiciForwarder } from '../../src/gateway/upstream/undici-forwarder';
import { announceReady, childOptions } from '../processes';

/** node:http and the gateway's undici forwarder, nothing else: the ceiling for a Node pass-through. */
// timeoutMs: longer under valgrind (--instructions), where a request takes 50x longer.
const {
  target,
  maxSockets,
  timeoutMs = 10_000,
} = childOptions<{ target: string; maxSockets: number; timeoutMs?: number }>();
const forwarder = createUndiciForwarder({ target, timeoutMs, maxSockets });
const server = http.createServer((req, res) => {
  const upstream = {
    method: req.method!,
    path: req.url ?? '/',
    headers: req.headers,
    client: req,
    receivedAt: process.hrtime.bigint(),
  };
  forwarder.forward(upstream, res, {
    onFailure: (failure) => {
      if (res.headersSent) return void res.destroy();
      res.writeHead(failure.code === 'upstream_timeout' ? 504 : 502).end();
    },
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  announceReady(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});
