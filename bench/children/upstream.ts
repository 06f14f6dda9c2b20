import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { announceReady, childOptions } from '../processes';

childOptions();

/** The fixed answer: a small JSON array, as a short page of pets would be. */
const BODY = Buffer.from(
  JSON.stringify([
    { id: 1, name: 'Rex', status: 'available', categoryId: 1 },
    { id: 2, name: 'Tom', status: 'pending', categoryId: 2 },
    { id: 3, name: 'Kiwi', status: 'sold', categoryId: 3 },
  ]),
);
const HEADERS = { 'content-type': 'application/json; charset=utf-8', 'content-length': String(BODY.length) };

// The request body, if any, is read and dropped; the answer never depends on the request, so that
// what is measured is whatever sits in front of this server.
const server = http.createServer((req, res) => {
  req.resume();
  res.writeHead(200, HEADERS);
  res.end(BODY);
});
// Longer than any pause between a row's rounds: an idle pooled connection the upstream closed
// just as the gateway reused it would be a reset, and five in a row open the gateway's circuit.
server.keepAliveTimeout = 600_000;
server.listen(0, '127.0.0.1', () => {
  announceReady(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});
