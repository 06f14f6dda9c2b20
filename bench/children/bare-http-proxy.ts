import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import { announceReady, childOptions } from '../processes';

/**
 * The baseline: express with nothing but http-proxy-middleware, over the same keep-alive agent as
 * the gateway's http-proxy forwarder (src/gateway/upstream/http-proxy-forwarder.ts).
 */
const { target, maxSockets } = childOptions<{ target: string; maxSockets: number }>();
const agent = new http.Agent({ keepAlive: true, maxSockets, keepAliveMsecs: 1000 });
const app = express();
app.disable('x-powered-by');
app.use(createProxyMiddleware({ target, changeOrigin: true, agent }));
const server = http.createServer(app);
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  announceReady(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});
