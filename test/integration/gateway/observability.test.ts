import request from 'supertest';
import { startTestProduct, type ProductHarness } from './gateway-kit';
import { createKey } from '../../support/keys';

/** CONTRACT §6: metric labels hold route templates, never raw paths, keys or key ids; logs never hold a key. */
describe('metrics and logs of the gateway', () => {
  let product: ProductHarness;
  let key: string;
  let keyId: string;
  let metrics: string;

  beforeAll(async () => {
    product = await startTestProduct({ overrides: { anonymous: { perMinute: 2 } } });
    const created = await createKey(product, { plan: 'pro', limits: { perMinute: 3, perDay: 100 } });
    key = created.key;
    keyId = created.id;
    const gateway = request(product.gatewayUrl);
    await gateway.get('/v1/pets/12345').set('Authorization', created.auth); // 404, deprecated route
    await gateway.get('/v1/owners/77').set('Authorization', created.auth); // 404, no route
    await gateway.get('/v1/pets?limit=3').set('Authorization', created.auth); // 200
    await gateway.get('/v1/pets').set('Authorization', created.auth); // 429
    for (let i = 0; i < 3; i++) await gateway.get('/v1/pets'); // 401, 401, 429 anonymous
    await gateway.get('/v1/pets').set('Authorization', 'Bearer asg_dev_' + 'Q'.repeat(32)); // invalid, anonymous-limited
    metrics = (await request(product.adminUrl).get('/metrics').expect(200)).text;
  });

  afterAll(async () => {
    await product?.close();
  });

  it('requests are labelled with the route template, and unmatched paths with one label', () => {
    expect(metrics).toMatch(
      /^gateway_http_requests_total\{method="GET",route="\/v1\/pets\/\{petId\}",status_code="404",plan="pro"\} 1$/m,
    );
    expect(metrics).toMatch(
      /^gateway_http_requests_total\{method="GET",route="unmatched",status_code="404",plan="pro"\} 1$/m,
    );
    expect(metrics).toMatch(
      /^gateway_http_requests_total\{method="GET",route="\/v1\/pets",status_code="200",plan="pro"\} 1$/m,
    );
    expect(metrics).toMatch(
      /^gateway_http_requests_total\{method="GET",route="\/v1\/pets",status_code="429",plan="pro"\} 1$/m,
    );
    expect(metrics).not.toMatch(/route="[^"]*(12345|owners|limit=)/);
  });

  it('refusals are counted by window, auth failures by reason, deprecated calls by route', () => {
    expect(metrics).toMatch(/^gateway_ratelimit_rejections_total\{plan="pro",window="minute"\} 1$/m);
    expect(metrics).toMatch(/^gateway_ratelimit_rejections_total\{plan="anonymous",window="anonymous"\} 2$/m);
    expect(metrics).toMatch(/^gateway_auth_failures_total\{reason="missing"\} 3$/m);
    expect(metrics).toMatch(/^gateway_auth_failures_total\{reason="invalid"\} 1$/m);
    expect(metrics).toMatch(/^gateway_deprecated_requests_total\{route="\/v1\/pets\/\{petId\}",plan="pro"\} 1$/m);
  });

  it('no label holds a key or a key id', () => {
    expect(metrics).not.toContain(keyId);
    expect(metrics).not.toContain(key);
    expect(metrics).not.toContain('asg_dev_');
  });

  it('no log line holds a key, presented or created', () => {
    const logs = product.logs.text();
    expect(logs).toContain(keyId); // the request log names the key by id…
    expect(logs).not.toContain(key); // …never by the key itself
    expect(logs).not.toContain('QQQQQQQQQQ');
  });
});
