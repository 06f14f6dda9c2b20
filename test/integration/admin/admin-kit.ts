import { createHash } from 'node:crypto';
import request from 'supertest';
import type { ProductHarness } from '../../support/product-harness';

/**
 * Shared helpers of the admin suites: authenticated requests against a running product's admin
 * listener, and the checks every admin answer must pass. Everything goes over real HTTP on loopback.
 */

export type AdminMethod = 'get' | 'post' | 'patch' | 'delete';

/** A request to the admin listener carrying the product's admin token. */
export function adminRequest(product: ProductHarness, method: AdminMethod, path: string): request.Test {
  return request(product.adminUrl)[method](path).set('Authorization', `Bearer ${product.adminToken}`);
}

export interface CreatedKeyBody {
  id: string;
  key: string;
  name: string;
  plan: string;
  limits: { perMinute: number; perDay: number };
  createdAt: string;
}

/** POST /admin/keys, expecting 201; returns the body (the only place the full key appears). */
export async function createKeyOverApi(
  product: ProductHarness,
  body: { name: string; plan: string; limits?: { perMinute: number; perDay: number } },
): Promise<CreatedKeyBody> {
  const res = await adminRequest(product, 'post', '/admin/keys').send(body);
  expect({ status: res.status, body: res.body as unknown }).toEqual({ status: 201, body: expect.objectContaining({ key: expect.any(String) }) });
  return res.body as CreatedKeyBody;
}

/** GET /v1/pets at the gateway with `key`. */
export function gatewayGet(product: ProductHarness, key: string, path = '/v1/pets'): request.Test {
  return request(product.gatewayUrl).get(path).set('Authorization', `Bearer ${key}`);
}

/** The contract's Error body: JSON `{code, message, status}` with `status` equal to the HTTP status. */
export function expectError(res: request.Response, status: number, code: string): void {
  expect({ status: res.status, body: res.body as unknown }).toEqual({ status, body: { code, message: expect.any(String), status } });
  expect(res.headers['content-type']).toMatch(/^application\/json/);
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Polls `check` until it holds; fails after `timeoutMs` (the contract's propagation bound). */
export async function eventually(timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The JSON log lines a product wrote, parsed. */
export function logRecords(product: ProductHarness): Array<Record<string, unknown>> {
  return product.logs.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
}

export const ISO_INSTANT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
export const KEY_ID = /^key_[0-9a-f]{24}$/;
