import request from 'supertest';
import { startTestProduct, type ProductHarness } from './gateway-kit';
import { createKey } from '../../support/keys';
import { logLines, type LogLine } from '../../support/log-lines';

/**
 * Issue 5: one JSON line per request with the fields operators search by, the client's request id
 * carried to the inventory and found in both services' lines, and never a key.
 */

/** The gateway's per-request lines (the inventory's carry component "inventory"). */
function gatewayLines(product: ProductHarness, requestId: string): LogLine[] {
  return logLines(product).filter((l) => l.msg === 'request' && l.requestId === requestId && l.component === undefined);
}

describe('request log lines', () => {
  let product: ProductHarness;
  let key: string;
  let keyId: string;

  beforeAll(async () => {
    product = await startTestProduct({});
    const created = await createKey(product, { plan: 'pro', limits: { perMinute: 2, perDay: 100 } });
    key = created.key;
    keyId = created.id;
  });

  afterAll(async () => {
    await product?.close();
  });

  it('a forwarded request: one line with every field, upstream time included', async () => {
    await request(product.gatewayUrl)
      .get('/v1/pets')
      .set('Authorization', `Bearer ${key}`)
      .set('X-Request-Id', 'trace-forwarded-1')
      .expect(200);
    const lines = gatewayLines(product, 'trace-forwarded-1');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toEqual(
      expect.objectContaining({
        level: 30,
        requestId: 'trace-forwarded-1',
        method: 'GET',
        route: '/v1/pets',
        status: 200,
        durationMs: expect.any(Number),
        upstreamMs: expect.any(Number),
        plan: 'pro',
        keyId,
        clientAddress: '127.0.0.1',
        rateLimit: 'allowed',
      }),
    );
    expect(lines[0]!.upstreamMs as number).toBeLessThanOrEqual(lines[0]!.durationMs as number);
  });

  it('the request id reaches the inventory, whose own line carries it', async () => {
    await request(product.gatewayUrl)
      .get('/v1/pets/1')
      .set('Authorization', `Bearer ${key}`)
      .set('X-Request-Id', 'trace-both-2');
    const inventoryLines = logLines(product).filter(
      (l) => l.component === 'inventory' && l.requestId === 'trace-both-2',
    );
    expect(inventoryLines.length).toBeGreaterThanOrEqual(1);
    expect(gatewayLines(product, 'trace-both-2')).toHaveLength(1);
  });

  it('a refused request: no upstream time, the refusal named', async () => {
    // The key's 2 a minute: one used above, one here, then 429.
    await request(product.gatewayUrl).get('/v1/pets').set('Authorization', `Bearer ${key}`);
    const res = await request(product.gatewayUrl)
      .get('/v1/pets')
      .set('Authorization', `Bearer ${key}`)
      .set('X-Request-Id', 'trace-refused-3');
    expect(res.status).toBe(429);
    expect(gatewayLines(product, 'trace-refused-3')).toEqual([
      expect.objectContaining({ status: 429, upstreamMs: null, plan: 'pro', keyId, rateLimit: 'limited' }),
    ]);
  });

  it('an insane request id is replaced by a generated one, in the response and the line', async () => {
    const res = await request(product.gatewayUrl)
      .get('/v1/pets')
      .set('X-Request-Id', 'no spaces allowed; ' + 'x'.repeat(200));
    const generated = res.headers['x-request-id'] as string;
    expect(generated).toMatch(/^[0-9a-f-]{36}$/);
    expect(gatewayLines(product, generated)).toEqual([
      expect.objectContaining({ status: 401, plan: 'anonymous', keyId: null, rateLimit: 'anonymous' }),
    ]);
  });

  it('no line holds the key, the Authorization header or a cookie, whatever the client sends', async () => {
    await request(product.gatewayUrl)
      .get('/v1/pets')
      .set('Authorization', `Bearer ${key}`)
      .set('Cookie', 'session=cookie-secret-value')
      .set('X-Request-Id', 'trace-secret-4');
    await request(product.gatewayUrl).get(`/v1/pets?api_key=${key}`);
    const text = product.logs.text();
    expect(text).toContain('trace-secret-4');
    expect(text).not.toContain(key);
    expect(text).not.toContain(key.slice(8));
    expect(text).not.toContain('cookie-secret-value');
    expect(text).not.toMatch(/Bearer /);
  });
});
