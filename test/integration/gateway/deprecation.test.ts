import request from 'supertest';
import { ManualClock } from '../../../src/shared/clock';
import { expectMatchesOpenApi } from '../../support/openapi';
import {
  expectRateLimitHeaders,
  header,
  startRecordingUpstream,
  startTestProduct,
  type ProductHarness,
  type TestUpstream,
} from './gateway-kit';
import { expectError } from '../../support/errors';
import { createKey } from '../../support/keys';

const DEPRECATED_AT_S = Date.UTC(2025, 11, 5) / 1000;
const SUNSET = 'Thu, 05 Dec 2030 00:00:00 GMT';
const DOCS = 'https://docs.animalstore.example/deprecations/get-pet';

/** The three headers RFC 9745 / RFC 8594 / RFC 8288 ask for, with the values config/default.yaml gives. */
function expectDeprecationHeaders(res: request.Response): void {
  expect(header(res, 'deprecation')).toBe(`@${DEPRECATED_AT_S}`);
  expect(header(res, 'sunset')).toBe(SUNSET);
  const link = header(res, 'link') ?? '';
  expect(link).toContain('</v1/pets>; rel="successor-version"');
  expect(link).toContain(`<${DOCS}>; rel="deprecation"`);
}

function expectNoDeprecationHeaders(res: request.Response): void {
  expect([header(res, 'deprecation'), header(res, 'sunset')]).toEqual([undefined, undefined]);
}

/** CONTRACT §3: every response of GET /v1/pets/{petId} announces its deprecation. */
describe('deprecation of GET /v1/pets/{petId}', () => {
  let product: ProductHarness;
  let auth: string;
  let petId: number;

  beforeAll(async () => {
    product = await startTestProduct();
    ({ auth } = await createKey(product, { plan: 'pro' }));
    const created = await request(product.gatewayUrl)
      .post('/v1/pets')
      .set('Authorization', auth)
      .send({ name: 'Old Timer', categoryId: 2 })
      .expect(201);
    petId = (created.body as { id: number }).id;
  });

  afterAll(async () => {
    await product?.close();
  });

  it('on a 200', async () => {
    const res = await request(product.gatewayUrl).get(`/v1/pets/${petId}`).set('Authorization', auth);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: petId, name: 'Old Timer' });
    expectDeprecationHeaders(res);
    expectRateLimitHeaders(res);
    expectMatchesOpenApi('GET', '/pets/{petId}', res);
  });

  it('on a 404 (unknown pet)', async () => {
    const res = await request(product.gatewayUrl).get('/v1/pets/999999999').set('Authorization', auth);
    expectError(res, 404, 'not_found');
    expectDeprecationHeaders(res);
    expectMatchesOpenApi('GET', '/pets/{petId}', res);
  });

  it('on a 400 (petId not a positive integer)', async () => {
    for (const bad of ['abc', '0', '-3', '1.5']) {
      const res = await request(product.gatewayUrl).get(`/v1/pets/${bad}`).set('Authorization', auth);
      expectError(res, 400, 'invalid_parameter');
      expectDeprecationHeaders(res);
      expectMatchesOpenApi('GET', '/pets/{petId}', res);
    }
  });

  it('on a HEAD, the same operation without a body', async () => {
    const res = await request(product.gatewayUrl).head(`/v1/pets/${petId}`).set('Authorization', auth);
    expect(res.status).toBe(200);
    expectDeprecationHeaders(res);
  });

  it('on a 401 (no key, bad key)', async () => {
    for (const res of [
      await request(product.gatewayUrl).get(`/v1/pets/${petId}`),
      await request(product.gatewayUrl)
        .get(`/v1/pets/${petId}`)
        .set('Authorization', 'Bearer asg_dev_0000000000000000000000000000'),
    ]) {
      expect(res.status).toBe(401);
      expectDeprecationHeaders(res);
      expectMatchesOpenApi('GET', '/pets/{petId}', res);
    }
  });

  it('on a 429', async () => {
    const limited = await createKey(product, { plan: 'free', limits: { perMinute: 1, perDay: 100 } });
    await request(product.gatewayUrl).get(`/v1/pets/${petId}`).set('Authorization', limited.auth).expect(200);
    const res = await request(product.gatewayUrl).get(`/v1/pets/${petId}`).set('Authorization', limited.auth);
    expectError(res, 429, 'rate_limited');
    expectDeprecationHeaders(res);
    expectMatchesOpenApi('GET', '/pets/{petId}', res);
  });

  it('not on the other operations', async () => {
    const list = await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
    expectNoDeprecationHeaders(list);
    const create = await request(product.gatewayUrl)
      .post('/v1/pets')
      .set('Authorization', auth)
      .send({ name: 'New', categoryId: 2 })
      .expect(201);
    expectNoDeprecationHeaders(create);
    const wrongMethod = await request(product.gatewayUrl)
      .delete(`/v1/pets/${petId}`)
      .set('Authorization', auth)
      .expect(405);
    expectNoDeprecationHeaders(wrongMethod);
  });
});

describe('after the configured sunset', () => {
  let upstream: TestUpstream;
  let product: ProductHarness;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    product = await startTestProduct({
      overrides: {
        upstream: { url: upstream.url },
        deprecations: [
          {
            method: 'GET',
            path: '/pets/{petId}',
            deprecatedAt: '2020-01-01T00:00:00Z',
            sunset: '2021-01-01T00:00:00Z',
            successor: '/v1/pets',
            docs: 'https://example.test/d',
          },
        ],
      },
    });
  });

  afterAll(async () => {
    await product?.close();
    await upstream?.close();
  });

  it('answers 410 gone with the deprecation and rate-limit headers, without forwarding', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const res = await request(product.gatewayUrl).get('/v1/pets/1').set('Authorization', auth);

    expectError(res, 410, 'gone');
    expect(header(res, 'deprecation')).toBe(`@${Date.UTC(2020, 0, 1) / 1000}`);
    expect(header(res, 'sunset')).toBe('Fri, 01 Jan 2021 00:00:00 GMT');
    expect(header(res, 'link')).toBe(
      '</v1/pets>; rel="successor-version", <https://example.test/d>; rel="deprecation"; type="text/html"',
    );
    expect(expectRateLimitHeaders(res)).toMatchObject({ limit: 60, remaining: 59 });
    expectMatchesOpenApi('GET', '/pets/{petId}', res);
    expect(upstream.requests).toHaveLength(0);

    // The rest of the API is still forwarded.
    await request(product.gatewayUrl).get('/v1/pets').set('Authorization', auth).expect(200);
    expect(upstream.requests.map((r) => `${r.method} ${r.url}`)).toEqual(['GET /v1/pets']);
  });
});

describe('the sunset instant follows the injected clock', () => {
  const clock = new ManualClock(Date.UTC(2030, 11, 4, 23, 59, 59));
  let product: ProductHarness;

  beforeAll(async () => {
    product = await startTestProduct({ clock });
  });

  afterAll(async () => {
    await product?.close();
  });

  it('served (404 from the inventory) one second before, 410 from the sunset on', async () => {
    const { auth } = await createKey(product, { plan: 'free' });
    const before = await request(product.gatewayUrl).get('/v1/pets/5').set('Authorization', auth);
    expectError(before, 404, 'not_found');
    expectDeprecationHeaders(before);

    clock.advance(1000);
    const after = await request(product.gatewayUrl).get('/v1/pets/5').set('Authorization', auth);
    expectError(after, 410, 'gone');
    expectDeprecationHeaders(after);
  });
});
