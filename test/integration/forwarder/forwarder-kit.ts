import http from 'node:http';
import net from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import express from 'express';
import { sendError } from '../../../src/shared/errors';
import { createHttpProxyForwarder } from '../../../src/gateway/upstream/http-proxy-forwarder';
import type {
  ForwarderSettings,
  GuardedForwarder,
  UpstreamFailure,
} from '../../../src/gateway/upstream/forward-contract';
import { createUndiciForwarder } from '../../../src/gateway/upstream/undici-forwarder';
import { listenOnLoopback } from '../../support/loopback';

/**
 * Builders for the forwarder contract: both implementations behind one tiny express app, upstreams
 * of our own (well-behaved, silent, resetting, or speaking invalid HTTP), and a raw HTTP client.
 */

export type ForwarderKind = 'http-proxy' | 'undici';

export const FORWARDERS: ReadonlyArray<[ForwarderKind, (settings: ForwarderSettings) => GuardedForwarder]> = [
  ['http-proxy', createHttpProxyForwarder],
  ['undici', createUndiciForwarder],
];

export const ONE_MIB = 1024 * 1024;
/** The body the upstream's `/large` and `/reset` routes send, so that the client can compare bytes. */
export const LARGE_BODY = randomBytes(ONE_MIB);

export function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

export function closeServer(server: http.Server | net.Server, sockets?: Set<net.Socket>): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    if (server instanceof http.Server) server.closeAllConnections();
    for (const socket of sockets ?? []) socket.destroy();
  });
}

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export interface ContractUpstream {
  url: string;
  host: string;
  received: ReceivedRequest[];
  /** Requests whose connection closed before the upstream finished its answer. */
  closedEarly: string[];
  close(): Promise<void>;
}

/**
 * A node:http upstream:
 * - `/echo` records the request and answers 200 JSON with the body's length and hash, plus end-to-end
 *   headers (two `Set-Cookie`, `X-Upstream`);
 * - `/status/NNN` answers that status with a small JSON body;
 * - `/large` streams LARGE_BODY in 64 KiB chunks (chunked encoding);
 * - `/reset` promises LARGE_BODY, sends 64 KiB of it, then destroys the socket;
 * - `/silent` reads the request and never answers.
 */
export async function startContractUpstream(): Promise<ContractUpstream> {
  const received: ReceivedRequest[] = [];
  const closedEarly: string[] = [];
  const server = http.createServer((req, res) => {
    res.on('close', () => {
      if (!res.writableFinished) closedEarly.push(req.url ?? '');
    });
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const path = req.url ?? '';
      if (path.startsWith('/echo')) {
        res.writeHead(200, {
          'content-type': 'application/json',
          'x-upstream': 'echo',
          'set-cookie': ['a=1; Path=/', 'b=2; Path=/'],
        });
        res.end(JSON.stringify({ bytes: body.length, sha256: sha256(body) }));
      } else if (path.startsWith('/status/')) {
        const status = Number(path.slice('/status/'.length));
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ status }));
      } else if (path === '/large') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        writeInChunks(res, LARGE_BODY, () => res.end());
      } else if (path === '/reset') {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(LARGE_BODY.length) });
        res.write(LARGE_BODY.subarray(0, 64 * 1024), () => req.socket.destroy());
      } else if (path === '/silent') {
        // never answers
      } else {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"not_found"}');
      }
    });
  });
  const url = await listenOnLoopback(server);
  return { url, host: new URL(url).host, received, closedEarly, close: () => closeServer(server) };
}

function writeInChunks(res: http.ServerResponse, data: Buffer, done: () => void, offset = 0): void {
  while (offset < data.length) {
    const chunk = data.subarray(offset, offset + 64 * 1024);
    offset += chunk.length;
    if (!res.write(chunk)) {
      res.once('drain', () => writeInChunks(res, data, done, offset));
      return;
    }
  }
  done();
}

export interface RawUpstream {
  url: string;
  close(): Promise<void>;
}

/** A raw TCP upstream that reads a request head and replies with `reply` (bytes, or a socket action). */
export async function startRawUpstream(reply: (socket: net.Socket) => void): Promise<RawUpstream> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let head = '';
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (head.includes('\r\n\r\n')) {
        head = '';
        reply(socket);
      }
    });
  });
  const url = await listenOnLoopback(server);
  return { url, close: () => closeServer(server, sockets) };
}

/** One answer as the proxy timed it: from its request event to the end (or cut) of its response. */
export interface ProxyTiming {
  status: number;
  elapsedMs: number;
}

export interface ContractProxy {
  url: string;
  forwarder: GuardedForwarder;
  failures: UpstreamFailure[];
  statuses: number[];
  /** Every answer as the proxy timed it, so that a busy test machine's accept queue is not counted. */
  timings: ProxyTiming[];
  close(): Promise<void>;
}

/**
 * The forwarder alone behind express, as the gateway calls it. Hop-by-hop request headers are the
 * forward step's to remove (upstreamHeaders); here only `Connection` is, since the test client
 * sends nothing else of the kind. `X-Abandon-After: N` makes the proxy give up after N body bytes
 * and answer 413 itself, as the gateway does with an oversized chunked body.
 */
export async function startContractProxy(
  create: (settings: ForwarderSettings) => GuardedForwarder,
  target: string,
  options: Partial<Omit<ForwarderSettings, 'target'>> = {},
): Promise<ContractProxy> {
  const forwarder = create({
    ...options,
    target,
    timeoutMs: options.timeoutMs ?? 10_000,
    maxSockets: options.maxSockets ?? 16,
  });
  const failures: UpstreamFailure[] = [];
  const statuses: number[] = [];
  const timings: ProxyTiming[] = [];
  const app = express();
  app.use((req, res) => {
    const arrived = performance.now();
    res.once('close', () => timings.push({ status: res.statusCode, elapsedMs: performance.now() - arrived }));
    const { connection: _connection, ...headers } = req.headers;
    const abandonAfter = req.headers['x-abandon-after'];
    const upstream = { method: req.method, path: req.url, headers, client: req, receivedAt: process.hrtime.bigint() };
    const abandon = forwarder.forward(upstream, res, {
      onResponse: (statusCode) => statuses.push(statusCode),
      onFailure: (failure) => {
        failures.push(failure);
        sendError(res, failure.code, failure.message, failure);
      },
    });
    if (typeof abandonAfter === 'string') {
      let receivedBytes = 0;
      req.on('data', (chunk: Buffer) => {
        receivedBytes += chunk.length;
        if (receivedBytes <= Number(abandonAfter) || res.headersSent) return;
        abandon();
        req.unpipe();
        res.setHeader('Connection', 'close');
        sendError(res, 'payload_too_large', 'too large');
      });
    }
  });
  const server = http.createServer(app);
  const url = await listenOnLoopback(server);
  return {
    url,
    forwarder,
    failures,
    statuses,
    timings,
    async close() {
      await closeServer(server);
      await forwarder.close();
    },
  };
}

export interface ClientResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** False when the connection ended before the whole response arrived. */
  complete: boolean;
}

export interface ClientRequestOptions {
  method?: string;
  headers?: http.OutgoingHttpHeaders;
  /** Written as it is (with Content-Length) or, as an array, chunk by chunk with chunked encoding. */
  body?: Buffer | Buffer[];
}

/** One request on a fresh connection; resolves once the response has ended or was cut off. */
export function send(url: string, options: ClientRequestOptions = {}): Promise<ClientResult> {
  return new Promise((resolve, reject) => {
    const headers: http.OutgoingHttpHeaders = { ...options.headers };
    if (Buffer.isBuffer(options.body)) headers['content-length'] = options.body.length;
    const req = http.request(url, { method: options.method ?? 'GET', headers, agent: false });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', () => {});
      res.on('close', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks),
          complete: res.complete,
        }),
      );
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      // The proxy may answer (413) and close before the whole body is written; the answer counts.
      if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(err);
    });
    if (Array.isArray(options.body)) {
      for (const chunk of options.body) req.write(chunk);
    } else if (options.body) {
      req.write(options.body);
    }
    req.end();
  });
}

/** Sends a GET and leaves it open; the caller hangs up with `hangUp()` whenever it likes. */
export function sendAndLeaveOpen(url: string): { hangUp(): void } {
  const req = http.request(url, { agent: false });
  req.on('error', () => {});
  req.end();
  return { hangUp: () => req.destroy() };
}

export function jsonOf(result: ClientResult): unknown {
  return JSON.parse(result.body.toString('utf8'));
}
