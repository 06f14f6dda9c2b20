import http from 'node:http';
import request from 'supertest';
import { countPetRows } from '../../support/inventory-harness';
import { freePort } from '../../support/redis-server';
import { startTestProduct, type ProductHarness, type ProductHarnessOptions } from '../../support/product-harness';
import { inventoryDatabasePath } from '../../../src/inventory/server';
import { listenOnLoopback } from '../../support/loopback';

/**
 * Shared builders for the gateway's integration suites: real products on loopback, small upstreams
 * of our own, and the checks every `/v1` response must pass.
 */

export { startTestProduct, type ProductHarness, type ProductHarnessOptions };

/** Every `/v1` response carries these (CONTRACT §3, §4). */
export const RATE_LIMIT_HEADERS = [
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'ratelimit-policy',
  'ratelimit',
] as const;

/** A moment well inside a UTC minute and day, so a handful of requests never straddle a window. */
export const MID_MINUTE = Date.UTC(2026, 2, 10, 12, 30, 15);

/** Header value as a string (supertest lower-cases names). */
export function header(res: request.Response, name: string): string | undefined {
  const value = res.headers[name.toLowerCase()] as string | string[] | undefined;
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * The five rate-limit headers and X-Request-Id are present and well formed; returns them parsed.
 * `RateLimit-Policy` names both key windows, or the single anonymous window.
 */
export function expectRateLimitHeaders(res: request.Response): {
  limit: number;
  remaining: number;
  reset: number;
  policy: string;
  rateLimit: string;
  requestId: string;
} {
  for (const name of RATE_LIMIT_HEADERS)
    expect({ name, value: header(res, name) }).toEqual({ name, value: expect.any(String) });
  const limit = Number(header(res, 'x-ratelimit-limit'));
  const remaining = Number(header(res, 'x-ratelimit-remaining'));
  const reset = Number(header(res, 'x-ratelimit-reset'));
  expect(Number.isInteger(limit) && limit > 0).toBe(true);
  expect(Number.isInteger(remaining) && remaining >= 0 && remaining <= limit).toBe(true);
  expect(Number.isInteger(reset) && reset > 0).toBe(true);
  const policy = header(res, 'ratelimit-policy')!;
  const rateLimit = header(res, 'ratelimit')!;
  expect(policy).toMatch(/^"[a-z]+";q=\d+;w=\d+(, "[a-z]+";q=\d+;w=\d+)*$/);
  expect(rateLimit).toMatch(/^"[a-z]+";r=\d+;t=\d+(, "[a-z]+";r=\d+;t=\d+)*$/);
  const requestId = header(res, 'x-request-id');
  expect(requestId).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
  return { limit, remaining, reset, policy, rateLimit, requestId: requestId! };
}

/** `"day";r=995;t=…` → { minute: {r, t}, day: {r, t} } from a RateLimit header. */
export function parseRateLimit(value: string): Record<string, { remaining: number; seconds: number }> {
  const windows: Record<string, { remaining: number; seconds: number }> = {};
  for (const item of value.split(',')) {
    const match = /^\s*"([a-z]+)";r=(\d+);t=(\d+)\s*$/.exec(item);
    if (!match) throw new Error(`not a RateLimit item: ${item}`);
    windows[match[1]!] = { remaining: Number(match[2]), seconds: Number(match[3]) };
  }
  return windows;
}

/** GET through the admin API. */
export function admin(product: ProductHarness): {
  get(path: string): request.Test;
  patch(path: string, body: object): request.Test;
  delete(path: string): request.Test;
} {
  const bearer = `Bearer ${product.adminToken}`;
  return {
    get: (path) => request(product.adminUrl).get(path).set('Authorization', bearer),
    patch: (path, body) => request(product.adminUrl).patch(path).set('Authorization', bearer).send(body),
    delete: (path) => request(product.adminUrl).delete(path).set('Authorization', bearer),
  };
}

/** Usage of a key as the admin API shows it (nothing consumed). */
export async function usageOf(
  product: ProductHarness,
  keyId: string,
): Promise<{
  minute: { limit: number; remaining: number; reset: number };
  day: { limit: number; remaining: number; reset: number };
  bannedUntil: string | null;
}> {
  const res = await admin(product).get(`/admin/keys/${keyId}`).expect(200);
  const body = res.body as { usage: { minute: never; day: never }; bannedUntil: string | null };
  return { ...body.usage, bannedUntil: body.bannedUntil };
}

/** Rows in the embedded inventory's pets table, read from the SQLite file itself. */
export function countPets(product: ProductHarness): number {
  return countPetRows(inventoryDatabasePath(product.config));
}

/**
 * Counts the requests the embedded inventory's own HTTP server receives from now on (an extra
 * 'request' listener on the real server: it observes, it does not answer).
 */
export function watchInventory(product: ProductHarness): { count(): number; paths: string[] } {
  const server = product.inventory?.server;
  if (!server) throw new Error('this product does not run the inventory itself');
  const paths: string[] = [];
  server.prependListener('request', (req: http.IncomingMessage) => paths.push(`${req.method} ${req.url}`));
  return { count: () => paths.length, paths };
}

/** Sends `count` requests one after the other; returns the responses. */
export async function sequentially(count: number, send: (i: number) => request.Test): Promise<request.Response[]> {
  const responses: request.Response[] = [];
  for (let i = 0; i < count; i++) responses.push(await send(i));
  return responses;
}

export interface RecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface TestUpstream {
  url: string;
  /** Its node:http server, for a test that watches requests arrive. */
  server: http.Server;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** An upstream that records every request it receives (headers and body) and answers 200 `[]`. */
export async function startRecordingUpstream(): Promise<TestUpstream> {
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      res.writeHead(200, { 'content-type': 'application/json' }).end('[]');
    });
  });
  const url = await listenOnLoopback(server);
  return { url, server, requests, close: () => closeServer(server) };
}

/** An upstream that accepts connections and requests but never answers. */
export async function startSilentUpstream(): Promise<TestUpstream> {
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: '' });
  });
  const url = await listenOnLoopback(server);
  return { url, server, requests, close: () => closeServer(server) };
}

/** A loopback URL on which nothing listens (connections are refused). */
export async function closedPortUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}
