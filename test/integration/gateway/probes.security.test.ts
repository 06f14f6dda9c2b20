import request from 'supertest';
import { sendRaw } from '../reliability/raw-http';
import { startTestProduct, type ProductHarness } from './gateway-kit';
import { createKey } from '../../support/keys';

/**
 * Probes an attacker would try beyond the bad-input catalogue: path tricks on both listeners, and
 * label cardinality of the metrics under random paths and methods. Each answer is pinned here.
 */

let product: ProductHarness;

beforeAll(async () => {
  product = await startTestProduct({
    overrides: {
      anonymous: { perMinute: 100_000 },
      admin: { failedTokensPerMinute: 100_000, failedTokensPerMinuteTotal: 100_000 },
    },
  });
});

afterAll(async () => {
  await product?.close();
});

describe('path tricks on the admin listener never reach a route without the token', () => {
  // [request target as sent on the wire, expected status without a token]
  const targets: Array<[string, number]> = [
    ['/admin/keys', 401],
    ['//admin/keys', 404], // Express does not collapse slashes or resolve dot segments: no such route
    ['/admin//keys', 401],
    ['/admin/keys/', 401],
    ['/ADMIN/keys', 401],
    ['/admin/./keys', 401],
    ['/admin/../admin/keys', 401],
    ['/admin/%2e%2e/admin/keys', 401],
    ['/admin%2Fkeys', 404],
    ['/metrics/../admin/keys', 404],
    ['/healthz/../admin/keys', 404],
    ['/admin/keys?x=/../../metrics', 401],
    ['/admin/keys%00', 401],
    ['/console/../admin/keys', 404],
  ];

  test.each(targets)('%s without a token: %i', async (target, status) => {
    const exchange = await sendRaw(product.adminUrl, { method: 'GET', target });
    const res = exchange.response!;
    expect({ target, status: res.status }).toEqual({ target, status });
    // Never the key list: refused for the token, or a route that does not exist.
    expect(res.body.toString('utf8')).not.toMatch(/"createdAt"/);
  });
});

describe('path tricks on the public listener', () => {
  test.each([
    ['/v1/../admin/keys', 404],
    ['/v1/%2e%2e/admin/keys', 404],
    ['/admin/keys', 404],
    ['/metrics', 404],
    ['//v1/pets', 404],
    ['/v1//pets', 404],
    ['/V1/pets', 404],
    ['http://evil.example/v1/pets', 200],
    ['*', 404],
  ])('%s with a valid key: %i', async (target, status) => {
    const { key } = await createKey(product, { plan: 'business' });
    const exchange = await sendRaw(product.gatewayUrl, {
      method: 'GET',
      target,
      headers: [['Authorization', `Bearer ${key}`]],
    });
    expect({ target, status: exchange.response?.status }).toEqual({ target, status });
  });
});

describe('metrics stay bounded under random paths and methods', () => {
  it('500 random paths and every method node accepts add no label value beyond the route templates and the method list', async () => {
    const { key } = await createKey(product, { plan: 'business' });
    const methods = [
      'GET',
      'POST',
      'PUT',
      'PATCH',
      'DELETE',
      'OPTIONS',
      'TRACE',
      'PROPFIND',
      'MKCOL',
      'M-SEARCH',
      'PURGE',
      'QUERY',
      'LINK',
      'UNLOCK',
    ];
    for (let i = 0; i < 500; i++) {
      const method = methods[i % methods.length]!;
      const path = `/v1/${Math.random().toString(36).slice(2)}/${i}?q=${i}`;
      await sendRaw(product.gatewayUrl, {
        method,
        target: path,
        headers: [
          ['Authorization', `Bearer ${key}`],
          ['Content-Length', '0'],
        ],
      });
    }
    const metrics = (await request(product.adminUrl).get('/metrics').expect(200)).text;
    const routes = new Set([...metrics.matchAll(/route="([^"]*)"/g)].map((match) => match[1]));
    for (const route of routes) expect(['/v1/pets', '/v1/pets/{petId}', '/v1/usage', 'unmatched']).toContain(route);
    const methodLabels = new Set([...metrics.matchAll(/method="([^"]*)"/g)].map((match) => match[1]));
    expect(methodLabels.size).toBeLessThanOrEqual(methods.length + 2);
    expect(metrics.split('\n').filter((line) => line.startsWith('gateway_http_requests_total{')).length).toBeLessThan(
      100,
    );
  });
});
