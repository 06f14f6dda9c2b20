import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createUndiciForwarder } from '../../src/gateway/upstream/undici-forwarder';
import { announceReady, childOptions } from '../processes';

/** node:http and the gateway's undici forwarder, nothing else: the ceiling for a Node pass-through. */
const { target, maxSockets } = childOptions<{ target: string; maxSockets: number }>();
const forwarder = createUndiciForwarder({ target, timeoutMs: 10_000, maxSockets });
const server = http.createServer((req, res) => {
  const upstream = { method: req.method!, path: req.url ?? '/', headers: req.headers, client: req, receivedAt: process.hrtime.bigint() };
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
