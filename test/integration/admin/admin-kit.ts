import { createHash } from 'node:crypto';
import request from 'supertest';
import type { ProductHarness } from '../../support/product-harness';
import { logLines } from '../../support/log-lines';

/**
 * Shared helpers of the admin suites: authenticated requests against a running product's admin
 * listener, and the checks every admin answer must pass. Everything goes over real HTTP on loopback.
 */

export type AdminMethod = 'get' | 'post' | 'patch' | 'delete';

/** A request to the admin listener carrying the product's admin token. */
export function adminRequest(product: ProductHarness, method: AdminMethod, path: string): request.Test {
  return request(product.adminUrl)[method](path).set('Authorization', `Bearer ${product.adminToken}`);
}

/** GET /v1/pets at the gateway with `key`. */
export function gatewayGet(product: ProductHarness, key: string, path = '/v1/pets'): request.Test {
  return request(product.gatewayUrl).get(path).set('Authorization', `Bearer ${key}`);
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The JSON log lines a product wrote, parsed (the kit's reader, `test/support/log-lines.ts`). */
export function logRecords(product: ProductHarness): Array<Record<string, unknown>> {
  return logLines(product);
}

export const ISO_INSTANT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
export const KEY_ID = /^key_[0-9a-f]{24}$/;
