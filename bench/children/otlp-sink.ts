import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { announceReady, childOptions } from '../processes';

childOptions();

// A stand-in OTLP/HTTP collector that reads every export and discards it, so that the traced
// gateway rows measure what tracing costs the gateway (spans, encoding, sending), not a collector.
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' });
    res.end();
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  announceReady(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});
