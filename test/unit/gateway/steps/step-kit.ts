import http from 'node:http';
import type { Socket } from 'node:net';
import { Duplex, Writable } from 'node:stream';
import { Registry, type Counter, type Histogram } from 'prom-client';
import type { ApiKeyRecord } from '../../../../src/keys/types';
import { createGatewayMetrics, type GatewayMetrics } from '../../../../src/shared/metrics/metrics';
import { newGatewayRequest, type GatewayRequest, type RequestContext } from '../../../../src/gateway/request-context';
import { createStoreCall, type StoreCall } from '../../../../src/gateway/steps/store-failure';
import { createLogger, type Logger } from '../../../../src/shared/logger';
import { keyRecordFixture } from '../../../support/key-record';
import { logLines } from '../../../support/log-lines';

/**
 * What the step tests share: Node's own request and response objects (no socket traffic: a
 * response without a connection keeps what it is given), a fresh metrics registry per test, a
 * logger whose lines are read back, and a RequestContext as the handler starts it.
 */

export const NOW = Date.UTC(2026, 2, 10, 12, 0, 0);

/**
 * An IncomingMessage as node:http's parser leaves it: `rawHeaders` as sent, `headers` lowercased
 * with a repeated Authorization or Host keeping its first value and other repeats joined by ", ".
 * Its socket is an in-memory one that keeps what a response writes to it.
 */
export function incoming(
  method: string,
  url: string,
  rawPairs: ReadonlyArray<readonly [string, string]> = [],
): http.IncomingMessage {
  const req = new http.IncomingMessage(memorySocket());
  req.method = method;
  req.url = url;
  req.httpVersion = '1.1';
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.rawHeaders = rawPairs.flatMap(([name, value]) => [name, value]);
  const headers: http.IncomingHttpHeaders = {};
  for (const [name, value] of rawPairs) {
    const lower = name.toLowerCase();
    const seen = headers[lower];
    if (seen === undefined) headers[lower] = value;
    else if (lower !== 'authorization' && lower !== 'host') headers[lower] = `${String(seen)}, ${value}`;
  }
  req.headers = headers;
  return req;
}

type MemorySocket = Socket & { written: string[] };

/** A duplex that swallows what is written to it, as a client connection that never answers back. */
function memorySocket(): MemorySocket {
  const written: string[] = [];
  const socket = new Duplex({
    write(chunk: Buffer, _encoding, done) {
      written.push(chunk.toString('latin1'));
      done();
    },
    read() {},
  });
  return Object.assign(socket, { written }) as unknown as MemorySocket;
}

/** What reached the client's connection: the status line, the headers as sent, the body. */
export interface SentResponse {
  statusLine: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * A real ServerResponse to `req`, attached to its in-memory socket: `end` finishes it as on a
 * live connection (writableFinished, 'finish'), and `sent()` reads back the bytes written.
 */
export function outgoing(req: http.IncomingMessage): { res: http.ServerResponse; sent: () => Promise<SentResponse> } {
  const socket = req.socket as MemorySocket;
  const res = new http.ServerResponse(req);
  res.assignSocket(socket);
  return { res, sent: () => readSent(socket) };
}

async function readSent(socket: MemorySocket): Promise<SentResponse> {
  // node:http corks the socket for one tick while a response ends.
  await new Promise((resolve) => setImmediate(resolve));
  const raw = socket.written.join('');
  const headEnd = raw.indexOf('\r\n\r\n');
  const [statusLine = '', ...headerLines] = raw.slice(0, headEnd === -1 ? raw.length : headEnd).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { statusLine, headers, body: headEnd === -1 ? '' : raw.slice(headEnd + 4) };
}

/** The response headers that start with one of the given prefixes (lowercased, as Node keeps them). */
export function headersStartingWith(res: http.ServerResponse, ...prefixes: string[]): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(res.getHeaders())) {
    if (prefixes.some((prefix) => name.startsWith(prefix.toLowerCase()))) picked[name] = value;
  }
  return picked;
}

/**
 * A request as the handler starts it (id req-0001 from 203.0.113.7, its path and origin form read
 * from `req.url`), over `req` and a real response to it; `overrides` stand for what earlier steps learned.
 */
export function gatewayRequest(
  req: http.IncomingMessage = incoming('GET', '/v1/pets'),
  overrides: Partial<GatewayRequest> = {},
): GatewayRequest {
  const { res } = outgoing(req);
  const url = req.url ?? '/';
  const path = url.split('?')[0]!;
  return Object.assign(
    newGatewayRequest(req, res, {
      requestId: 'req-0001',
      clientAddress: '203.0.113.7',
      path,
      originForm: url,
      span: null,
    }),
    overrides,
  );
}

/** What reached the client's connection for this request (see `outgoing`). */
export function sentFor(request: GatewayRequest): Promise<SentResponse> {
  return readSent(request.req.socket as MemorySocket);
}

/** A RequestContext alone, for what reads only what the steps learned (the log line). */
export function requestContext(overrides: Partial<RequestContext> = {}): RequestContext {
  const { req: _req, res: _res, method: _method, key: _key, keyless: _keyless, ...context } = gatewayRequest();
  return { ...context, ...overrides };
}

export function keyRecord(overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return keyRecordFixture(overrides);
}

/** A logger that writes into memory; `lines()` parses what it wrote. */
export function capturedLogger(): { logger: Logger; lines: () => Array<Record<string, unknown>> } {
  const written: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      written.push(chunk.toString());
      done();
    },
  });
  return {
    logger: createLogger('info', stream),
    lines: () => logLines(written.join('')),
  };
}

/** Metrics on a registry of their own, a captured logger, and the store call the handler builds from them. */
export function stepEnvironment(): {
  metrics: GatewayMetrics;
  logger: Logger;
  lines: () => Array<Record<string, unknown>>;
  storeCall: StoreCall;
} {
  const metrics = createGatewayMetrics(new Registry());
  const { logger, lines } = capturedLogger();
  return { metrics, logger, lines, storeCall: createStoreCall({ metrics, logger }) };
}

type Labels = Record<string, string>;

function matches(sampleLabels: Record<string, unknown>, labels: Labels): boolean {
  return Object.entries(labels).every(([name, value]) => String(sampleLabels[name]) === value);
}

/** A counter's value for exactly these labels (0 when never counted). */
export async function counted(counter: Counter<string>, labels: Labels = {}): Promise<number> {
  const { values } = await counter.get();
  const wanted = Object.keys(labels).length;
  const sample = values.find((v) => Object.keys(v.labels).length === wanted && matches(v.labels, labels));
  return sample?.value ?? 0;
}

/** Everything a counter holds, whatever the labels: to show nothing else was counted. */
export async function countedInAll(counter: Counter<string>): Promise<number> {
  const { values } = await counter.get();
  return values.reduce((sum, v) => sum + v.value, 0);
}

/** How many observations a histogram holds for these labels. */
export async function observations(histogram: Histogram<string>, labels: Labels): Promise<number> {
  const { values } = await histogram.get();
  const sample = values.find((v) => v.metricName?.endsWith('_count') && matches(v.labels, labels));
  return sample?.value ?? 0;
}
