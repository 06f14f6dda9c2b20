import fs from 'node:fs';
import request from 'supertest';
import { createKey } from '../../support/keys';
import { expectError } from '../../support/errors';
import { eventually } from '../../support/eventually';
import { uniqueNamespace } from '../../support/test-redis';
import { startTestProduct } from '../../support/product-harness';
import { tempFile } from '../startup/startup-kit';
import { RATE_LIMIT_HEADERS, usageOf } from '../gateway/gateway-kit';
import { logEntries, scrape, total } from '../gateway/listener-kit';
import { ask, awayFromDayEnd, expectRefusal, startAuthzProduct, type Decision, type ProductHarness } from './authz-kit';

/**
 * The decision listener's answers, asked directly as each proxy asks (CONTRACT §11): Envoy and the
 * Gateway API send the original request line, NGINX names it in X-Original-Method and
 * X-Original-URI. Two products on one Redis namespace: A runs the inventory, B decides beside it.
 */

jest.setTimeout(120_000);

const namespace = uniqueNamespace('authz');
let a: ProductHarness;
let b: ProductHarness;

beforeAll(async () => {
  a = await startAuthzProduct({ namespace });
  b = await startAuthzProduct({ namespace, overrides: { upstream: { url: a.inventory!.url } } });
});

afterAll(async () => {
  await b?.close();
  await a?.close();
});

function expectRateLimitHeaders(decision: Decision): void {
  for (const name of RATE_LIMIT_HEADERS)
    expect({ name, value: decision.headers.get(name) }).toEqual({ name, value: expect.any(String) });
}

describe.each([
  ['Envoy-style (the request line)', false],
  ['NGINX-style (X-Original-Method, X-Original-URI)', true],
])('asked %s', (_label, nginx) => {
  it('allows a key within its limits: 200, no body, the caller and the signed token the inventory accepts, the rate-limit headers', async () => {
    const key = await createKey(a, { plan: 'pro' });
    const decision = await ask(a, {
      target: '/v1/pets?limit=1',
      auth: key.auth,
      nginx,
      headers: { 'x-request-id': 'decision-1' },
    });

    expect(decision.status).toBe(200);
    expect(decision.text).toBe('');
    expect(decision.headers.get('x-key-id')).toBe(key.id);
    expect(decision.headers.get('x-plan')).toBe('pro');
    expect(decision.headers.get('x-consumer-id')).toBe('');
    expect(decision.headers.get('x-request-id')).toBe('decision-1');
    expectRateLimitHeaders(decision);
    expect(decision.headers.get('x-ratelimit-remaining')).toBe('299');
    // The token is the one the inventory requires: it answers the request the proxy passes on.
    const token = decision.headers.get('x-gateway-token')!;
    const res = await request(a.inventory!.url).get('/v1/pets?limit=1').set('X-Gateway-Token', token);
    expect(res.status).toBe(200);
  });

  it('refuses a missing key and an unknown one with 401, WWW-Authenticate and the Error body', async () => {
    const missing = await ask(a, { target: '/v1/pets', nginx });
    expectRefusal(missing, 401, 'missing_api_key');
    expect(missing.headers.get('www-authenticate')).toMatch(/^Bearer realm=/);
    expectRateLimitHeaders(missing);
    const unknown = await ask(a, {
      target: '/v1/pets',
      auth: `Bearer ${a.config.keys.prefix}${'x'.repeat(40)}`,
      nginx,
    });
    expectRefusal(unknown, 401, 'invalid_api_key');
  });

  it("refuses an operation outside the key's policy with 403 operation_not_allowed, spending nothing", async () => {
    const key = await createKey(a, { plan: 'pro', allowedOperations: ['listPets'] });
    expect((await ask(a, { target: '/v1/pets', auth: key.auth, nginx })).status).toBe(200);
    const refused = await ask(a, { method: 'POST', target: '/v1/pets', auth: key.auth, nginx });
    expectRefusal(refused, 403, 'operation_not_allowed');
    expect((await usageOf(a, key.id)).day.remaining).toBe(9999);
  });

  it('refuses past the limit with 429, Retry-After and the headers; the key is banned after the threshold', async () => {
    await awayFromDayEnd();
    const key = await createKey(a, { plan: 'enterprise', limits: { perMinute: 1000, perDay: 2 } });
    for (let i = 0; i < 2; i++) expect((await ask(a, { target: '/v1/pets', auth: key.auth, nginx })).status).toBe(200);
    const limited = await ask(a, { target: '/v1/pets', auth: key.auth, nginx });
    expectRefusal(limited, 429, 'rate_limited', 'day');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
    expectRateLimitHeaders(limited);
    // ban.threshold is 2: the third refusal bans.
    for (let i = 0; i < 2; i++) await ask(a, { target: '/v1/pets', auth: key.auth, nginx });
    const banned = await ask(a, { target: '/v1/pets', auth: key.auth, nginx });
    expectRefusal(banned, 429, 'temporarily_banned');
    expect(Number(banned.headers.get('retry-after'))).toBeGreaterThan(800);
  });

  it('says a deprecated operation is deprecated, and refuses it with 410 after its sunset', async () => {
    const key = await createKey(a, { plan: 'pro' });
    const served = await ask(a, { target: '/v1/pets/1', auth: key.auth, nginx });
    expect(served.status).toBe(200);
    expect(served.headers.get('deprecation')).toEqual(expect.any(String));
    expect(served.headers.get('sunset')).toBe('Thu, 05 Dec 2030 00:00:00 GMT');
    const gone = await ask(a, { method: 'POST', target: '/v1/pets', auth: key.auth, nginx });
    expectRefusal(gone, 410, 'gone');
    expect(gone.headers.get('link')).toMatch(/successor-version/);
  });

  it('refuses an unknown route (404) and a method the route does not serve (405 with Allow)', async () => {
    const key = await createKey(a, { plan: 'pro' });
    expectRefusal(await ask(a, { target: '/v1/owners', auth: key.auth, nginx }), 404, 'not_found');
    const wrongMethod = await ask(a, { method: 'PUT', target: '/v1/pets', auth: key.auth, nginx });
    expectRefusal(wrongMethod, 405, 'method_not_allowed');
    expect(wrongMethod.headers.get('allow')).toMatch(/GET/);
  });

  it('sends GET /v1/usage back to the public listener, spending nothing', async () => {
    const key = await createKey(a, { plan: 'pro' });
    const refused = await ask(a, { target: '/v1/usage', auth: key.auth, nginx });
    expectRefusal(refused, 404, 'not_found');
    expect((refused.body as { message: string }).message).toMatch(/public listener/);
    expect((await usageOf(a, key.id)).day.remaining).toBe(10000);
  });

  it('sends POST /v1/keys/revoke back to the public listener too: the key is not revoked by a decision', async () => {
    const key = await createKey(a, { plan: 'pro' });
    const refused = await ask(a, { method: 'POST', target: '/v1/keys/revoke', auth: key.auth, nginx });
    expectRefusal(refused, 404, 'not_found');
    expect((refused.body as { message: string }).message).toMatch(/public listener/);
    expect((await a.keyService.get(key.id))!.revokedAt).toBeNull();
  });
});

describe('NGINX-style refusals', () => {
  it("come as 403 (401 for a key's 401) naming their status and Error body in headers, as auth_request passes them to its error page", async () => {
    const missing = await ask(a, { target: '/v1/pets', nginx: true });
    expect([missing.status, missing.headers.get('x-authz-status')]).toEqual([401, '401']);
    const key = await createKey(a, { plan: 'pro' });
    const unknownRoute = await ask(a, { target: '/v1/owners', auth: key.auth, nginx: true });
    expect([unknownRoute.status, unknownRoute.headers.get('x-authz-status')]).toEqual([403, '404']);
    expect(JSON.parse(unknownRoute.headers.get('x-authz-error')!)).toEqual({
      code: 'not_found',
      message: expect.any(String),
      status: 404,
    });
  });

  it('are counted under their own status', async () => {
    const key = await createKey(a, { plan: 'pro' });
    const counted = async () =>
      total(await scrape(a, 'gateway_authz_decisions_total'), { method: 'PUT', route: '/v1/pets', status_code: '405' });
    const before = await counted();
    await ask(a, { method: 'PUT', target: '/v1/pets', auth: key.auth, nginx: true });
    expect((await counted()) - before).toBe(1);
  });

  it('X-Original-URI without X-Original-Method is a malformed request, not a guess', async () => {
    const res = await fetch(`${a.authzUrl}/_authz`, { headers: { 'x-original-uri': '/v1/pets' } });
    const text = await res.text();
    expectRefusal(
      { nginx: true, status: res.status, headers: res.headers, text, body: JSON.parse(text) },
      400,
      'malformed_request',
    );
  });
});

describe('counting', () => {
  it('decisions and the public listener take units of the same windows', async () => {
    await awayFromDayEnd();
    const key = await createKey(a, { plan: 'enterprise', limits: { perMinute: 1000, perDay: 5 } });
    for (let i = 0; i < 2; i++) await request(a.gatewayUrl).get('/v1/pets').set('Authorization', key.auth).expect(200);
    for (let i = 0; i < 3; i++) expect((await ask(a, { target: '/v1/pets', auth: key.auth })).status).toBe(200);
    expectRefusal(await ask(a, { target: '/v1/pets', auth: key.auth }), 429, 'rate_limited');
    expectError(await request(a.gatewayUrl).get('/v1/pets').set('Authorization', key.auth), 429, 'rate_limited');
  });

  it('two instances on one Redis: 60 concurrent decisions split over both allow exactly the limit', async () => {
    await awayFromDayEnd();
    const key = await createKey(a, { plan: 'enterprise', limits: { perMinute: 1000, perDay: 25 } }, { overApi: true });
    const decisions = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        ask(i % 2 === 0 ? a : b, { target: '/v1/pets', auth: key.auth, nginx: i % 4 < 2 }),
      ),
    );
    const allowed = decisions.filter((d) => d.status === 200);
    expect(allowed).toHaveLength(25);
    // Half of them asked NGINX-style: their refusals came as 403 naming 429.
    expect(decisions.filter((d) => (d.body as { status?: number } | null)?.status === 429)).toHaveLength(35);
    expect((await usageOf(b, key.id)).day.remaining).toBe(0);
  });

  it("a consumer's keys: X-Consumer-Id names it, and its shared windows refuse as on the public listener", async () => {
    await awayFromDayEnd();
    const consumer = await a.consumerService.create({ name: 'authz shared', limits: { perDay: 3 } });
    const first = await createKey(a, { plan: 'pro', consumerId: consumer.id });
    const second = await createKey(a, { plan: 'pro', consumerId: consumer.id });
    const allowed = await ask(a, { target: '/v1/pets', auth: first.auth });
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get('x-consumer-id')).toBe(consumer.id);
    expect(allowed.headers.get('ratelimit')).toMatch(/"consumer-day";r=2;/);
    // B learns of the consumer through the store; its decision takes a unit of the same shared day.
    await eventually(async () => (await ask(b, { target: '/v1/pets', auth: second.auth })).status === 200, {
      what: "B's decision for the consumer's second key",
    });
    expect((await request(a.gatewayUrl).get('/v1/pets').set('Authorization', first.auth)).status).toBe(200);
    const refused = await ask(b, { target: '/v1/pets', auth: second.auth, nginx: true });
    expectRefusal(refused, 429, 'rate_limited');
    expect((refused.body as { message: string }).message).toMatch(/shares with the other keys of its consumer/);
  });

  it('maxInFlight is not enforced (no slot is held by a decision), and the start said so naming the plan', async () => {
    const key = await createKey(a, { plan: 'one-at-a-time' });
    const decisions = await Promise.all(
      Array.from({ length: 10 }, () => ask(a, { target: '/v1/pets', auth: key.auth })),
    );
    expect(decisions.map((d) => d.status)).toEqual(Array(10).fill(200));
    const warning = logEntries(a).find(
      (line) => typeof line.msg === 'string' && line.msg.includes('does not enforce maxInFlight'),
    );
    expect(warning).toMatchObject({ plans: ['one-at-a-time'] });
  });

  it('decisions are counted apart from the requests the gateway served, under the original route', async () => {
    const key = await createKey(a, { plan: 'pro' });
    const before = total(await scrape(a, 'gateway_authz_decisions_total'), {
      route: '/v1/pets/{petId}',
      status_code: '200',
      method: 'GET',
    });
    const servedBefore = total(await scrape(a, 'gateway_http_requests_total'), { route: '/v1/pets/{petId}' });
    for (let i = 0; i < 3; i++)
      expect((await ask(a, { target: `/v1/pets/${i}`, auth: key.auth, nginx: i === 0 })).status).toBe(200);
    const after = total(await scrape(a, 'gateway_authz_decisions_total'), {
      route: '/v1/pets/{petId}',
      status_code: '200',
      method: 'GET',
    });
    expect(after - before).toBe(3);
    expect(total(await scrape(a, 'gateway_http_requests_total'), { route: '/v1/pets/{petId}' })).toBe(servedBefore);
  });
});

describe('trusted proxies, and a reload', () => {
  let product: ProductHarness;
  let configFile: string;

  beforeAll(async () => {
    configFile = tempFile('authz-trust.yaml', 'server:\n  trustedProxies: []\n');
    product = await startTestProduct({
      redis: false,
      env: { CONFIG_FILE: configFile },
      overrides: { server: { host: '127.0.0.1', authzPort: 0 } },
    });
  });

  afterAll(async () => {
    await product?.close();
  });

  it('believes X-Original-* only from a trusted proxy, and follows a reload that trusts one', async () => {
    const key = await createKey(product, { plan: 'pro' });
    // Untrusted: the request line (/_authz) is the request, outside the API.
    const untrusted = await ask(product, { target: '/v1/pets', auth: key.auth, nginx: true });
    expect({
      status: untrusted.status,
      code: (untrusted.body as { code: string }).code,
      decided: untrusted.headers.get('x-authz-status'),
    }).toEqual({ status: 404, code: 'not_found', decided: null });

    fs.writeFileSync(configFile, 'server:\n  trustedProxies: ["127.0.0.1"]\n');
    expect(await product.reload('test')).toMatchObject({ result: 'success' });
    const trusted = await ask(product, { target: '/v1/pets', auth: key.auth, nginx: true });
    expect(trusted.status).toBe(200);
    expect(trusted.headers.get('x-key-id')).toBe(key.id);
  });
});
