import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import { expectMatchesOpenApi, expectMatchesSchema } from '../../support/openapi';
import {
  MID_MINUTE,
  expectRateLimitHeaders,
  header,
  startTestProduct,
  usageOf,
  watchInventory,
  type ProductHarness,
} from './gateway-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

/** CONTRACT §3: unknown paths under /v1 are 404, known paths with another method 405; both count. */
describe('routing under /v1', () => {
  const clock = new ManualClock(MID_MINUTE);
  let product: ProductHarness;

  beforeAll(async () => {
    product = await startTestProduct({ clock });
  });

  afterAll(async () => {
    await product?.close();
  });

  it('404 not_found for a path the API does not have, with rate-limit headers, consuming a unit each', async () => {
    const { auth, id } = await createKey(product, { plan: 'free' });
    const inventory = watchInventory(product);
    const paths = ['/v1', '/v1/', '/v1/owners', '/v1/pets/1/toys', '/v1/pets//', '/v1/PETS', '/v1/pets/1/'];
    const remaining: number[] = [];
    for (const path of paths) {
      const res = await request(product.gatewayUrl).get(path).set('Authorization', auth);
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
      expectError(res, 404, 'not_found');
      expectMatchesSchema('NotFoundError', res.body);
      remaining.push(expectRateLimitHeaders(res).remaining);
    }
    expect(remaining).toEqual(paths.map((_, i) => 59 - i));
    expect((await usageOf(product, id)).minute.remaining).toBe(60 - paths.length);
    expect(inventory.count()).toBe(0);
  });

  it('405 method_not_allowed with Allow for a known path and another method, consuming a unit each', async () => {
    const { auth, id } = await createKey(product, { plan: 'free' });
    const inventory = watchInventory(product);
    const cases: Array<[string, string, string, string]> = [
      ['DELETE', '/v1/pets', '/pets', 'GET, HEAD, POST'],
      ['PUT', '/v1/pets', '/pets', 'GET, HEAD, POST'],
      ['PATCH', '/v1/pets/1', '/pets/{petId}', 'GET, HEAD'],
      ['DELETE', '/v1/pets/1', '/pets/{petId}', 'GET, HEAD'],
      ['POST', '/v1/pets/1', '/pets/{petId}', 'GET, HEAD'],
    ];
    const remaining: number[] = [];
    for (const [method, path, template, allow] of cases) {
      const res = await request(product.gatewayUrl)
        [method.toLowerCase() as 'delete' | 'put' | 'patch' | 'post'](path)
        .set('Authorization', auth);
      expectError(res, 405, 'method_not_allowed');
      expect(header(res, 'allow')).toBe(allow);
      expectMatchesOpenApi(method, template, res);
      remaining.push(expectRateLimitHeaders(res).remaining);
    }
    expect(remaining).toEqual(cases.map((_, i) => 59 - i));
    expect((await usageOf(product, id)).minute.remaining).toBe(60 - cases.length);
    expect(inventory.count()).toBe(0);
  });

  it('an unknown path or method without a key is a 401 first: no route is revealed', async () => {
    expectError(await request(product.gatewayUrl).get('/v1/owners'), 401, 'missing_api_key');
    expectError(await request(product.gatewayUrl).delete('/v1/pets'), 401, 'missing_api_key');
  });

  it('outside /v1: 404 without consuming a unit', async () => {
    const { auth, id } = await createKey(product, { plan: 'free' });
    for (const path of ['/', '/pets', '/v2/pets', '/v10/pets', '/admin/keys']) {
      const res = await request(product.gatewayUrl).get(path).set('Authorization', auth);
      expectError(res, 404, 'not_found');
    }
    expect((await usageOf(product, id)).minute.remaining).toBe(60);
  });

  it('once the window is used up, unknown paths are refused with 429 like any other', async () => {
    const { auth } = await createKey(product, { plan: 'free', limits: { perMinute: 1, perDay: 10 } });
    expectError(await request(product.gatewayUrl).get('/v1/owners').set('Authorization', auth), 404, 'not_found');
    const refused = await request(product.gatewayUrl).get('/v1/owners').set('Authorization', auth);
    expectError(refused, 429, 'rate_limited');
    expect(expectRateLimitHeaders(refused).remaining).toBe(0);
  });
});
