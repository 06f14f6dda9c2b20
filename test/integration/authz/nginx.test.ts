import { createKey } from '../../support/keys';
import { uniqueNamespace } from '../../support/test-redis';
import { usageOf } from '../gateway/gateway-kit';
import { scrape, total } from '../gateway/listener-kit';
import { awayFromDayEnd, startAuthzProduct, type ProductHarness } from './authz-kit';
import { docsNginxConfig, startNginx, type RunningNginx } from './nginx-kit';
import { freePort } from '../../support/redis-server';

/**
 * Debian's NGINX in front of the inventory, asking two gateway instances' decision listeners on
 * one Redis (CONTRACT §11), with the configuration docs/external-auth.md shows, exactly: what a
 * client gets through NGINX is what the public listener would have given it.
 */

jest.setTimeout(180_000);

const namespace = uniqueNamespace('nginx');
// Only the default deprecation (GET /pets/{petId}, sunset in 2030): POST /v1/pets is served here.
const overrides = {
  deprecations: [
    {
      method: 'GET',
      path: '/pets/{petId}',
      deprecatedAt: '2025-12-05T00:00:00Z',
      sunset: '2030-12-05T00:00:00Z',
      successor: '/v1/pets',
      docs: 'https://docs.example/get-pet',
    },
  ],
};
let a: ProductHarness;
let b: ProductHarness;
let nginx: RunningNginx;

beforeAll(async () => {
  a = await startAuthzProduct({ namespace, overrides });
  b = await startAuthzProduct({ namespace, overrides: { ...overrides, upstream: { url: a.inventory!.url } } });
  const targets = {
    gateway1: { authz: a.authzUrl!, public: a.gatewayUrl },
    gateway2: { authz: b.authzUrl!, public: b.gatewayUrl },
    inventory: a.inventory!.url,
  };
  nginx = await startNginx((port) => docsNginxConfig(targets, port));
});

afterAll(async () => {
  await nginx?.stop();
  await b?.close();
  await a?.close();
});

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

async function through(
  pathAndQuery: string,
  init: { method?: string; auth?: string; json?: unknown } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (init.auth) headers.authorization = init.auth;
  if (init.json !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${nginx.url}${pathAndQuery}`, {
    method: init.method ?? 'GET',
    headers,
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON: the assertion on the body says so.
  }
  return { status: res.status, headers: res.headers, body };
}

/** The contract's Error body, its status the answer's, as application/json. */
function expectRefusal(answer: Answer, status: number, code: string): void {
  // A 429 rate_limited names the window that refused it (CONTRACT §3), through NGINX as well.
  const window = code === 'rate_limited' ? { window: expect.any(String) } : {};
  expect({ status: answer.status, body: answer.body }).toEqual({
    status,
    body: { code, message: expect.any(String), status, ...window },
  });
  expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
}

function expectRateLimitHeaders(answer: Answer): void {
  for (const name of [
    'x-ratelimit-limit',
    'x-ratelimit-remaining',
    'x-ratelimit-reset',
    'ratelimit-policy',
    'ratelimit',
  ]) {
    expect({ name, value: answer.headers.get(name) }).toEqual({ name, value: expect.stringMatching(/\S/) });
  }
}

it("a key within its limits gets the inventory's answer, with the decision's headers copied onto it", async () => {
  const key = await createKey(a, { plan: 'pro' });
  const created = await through('/v1/pets', {
    method: 'POST',
    auth: key.auth,
    json: { name: 'Through NGINX', categoryId: 1 },
  });
  expect(created.status).toBe(201);
  expect(created.body).toMatchObject({ name: 'Through NGINX' });
  expectRateLimitHeaders(created);
  expect(created.headers.get('x-ratelimit-remaining')).toBe('299');
  // The inventory echoes the request id NGINX named the decision with: one id, end to end.
  expect(created.headers.get('x-request-id')).toMatch(/^[0-9a-f]{32}$/);

  const read = await through(`/v1/pets/${(created.body as { id: number }).id}`, { auth: key.auth });
  expect(read.status).toBe(200);
  expect(read.body).toMatchObject({ name: 'Through NGINX' });
  expect(read.headers.get('x-ratelimit-remaining')).toBe('298');
  expect(read.headers.get('deprecation')).toEqual(expect.any(String));
  expect(read.headers.get('sunset')).toBe('Thu, 05 Dec 2030 00:00:00 GMT');
  // The decision's own headers stay between NGINX and the inventory.
  for (const name of ['x-gateway-token', 'x-key-id', 'x-plan', 'x-authz-error'])
    expect({ name, value: read.headers.get(name) }).toEqual({ name, value: null });
});

it('a 429 arrives through NGINX as a 429, with Retry-After, the rate-limit headers and the Error body', async () => {
  await awayFromDayEnd();
  const key = await createKey(a, { plan: 'enterprise', limits: { perMinute: 1000, perDay: 2 } });
  for (let i = 0; i < 2; i++) expect((await through('/v1/pets?limit=1', { auth: key.auth })).status).toBe(200);
  const limited = await through('/v1/pets?limit=1', { auth: key.auth });
  expectRefusal(limited, 429, 'rate_limited');
  expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  expectRateLimitHeaders(limited);
  expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
  expect(limited.headers.get('x-request-id')).toMatch(/^[0-9a-f]{32}$/);
});

it('two gateway instances behind NGINX stay exact: 40 concurrent requests admit the limit of 15, both instances deciding', async () => {
  await awayFromDayEnd();
  const key = await createKey(a, { plan: 'enterprise', limits: { perMinute: 1000, perDay: 15 } });
  const decided = async (product: ProductHarness) =>
    total(await scrape(product, 'gateway_authz_decisions_total'), { route: '/v1/pets' });
  const before = [await decided(a), await decided(b)];
  const answers = await Promise.all(Array.from({ length: 40 }, () => through('/v1/pets?limit=1', { auth: key.auth })));
  const statuses = answers.map((answer) => answer.status);
  expect(statuses.filter((status) => status === 200)).toHaveLength(15);
  expect(statuses.filter((status) => status === 429)).toHaveLength(25);
  expect((await usageOf(b, key.id)).day.remaining).toBe(0);
  const after = [await decided(a), await decided(b)];
  expect(after[0]! - before[0]!).toBeGreaterThan(0);
  expect(after[1]! - before[1]!).toBeGreaterThan(0);
  expect(after[0]! - before[0]! + (after[1]! - before[1]!)).toBe(40);
});

it('a bad key, a key outside its policy and a banned key each get their refusal', async () => {
  const missing = await through('/v1/pets');
  expectRefusal(missing, 401, 'missing_api_key');
  expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="animal-store"');
  const unknown = await through('/v1/pets', { auth: `Bearer ${a.config.keys.prefix}${'z'.repeat(40)}` });
  expectRefusal(unknown, 401, 'invalid_api_key');
  expect(unknown.headers.get('www-authenticate')).toMatch(/^Bearer realm="animal-store", error="invalid_token"/);

  const reader = await createKey(a, { plan: 'pro', allowedOperations: ['listPets'] });
  expect((await through('/v1/pets', { auth: reader.auth })).status).toBe(200);
  expectRefusal(
    await through('/v1/pets', { method: 'POST', auth: reader.auth, json: { name: 'Not allowed', categoryId: 1 } }),
    403,
    'operation_not_allowed',
  );

  await awayFromDayEnd();
  const retrier = await createKey(a, { plan: 'enterprise', limits: { perMinute: 1000, perDay: 1 } });
  expect((await through('/v1/pets', { auth: retrier.auth })).status).toBe(200);
  // ban.threshold is 2: the third refusal bans the key.
  for (let i = 0; i < 3; i++) expect((await through('/v1/pets', { auth: retrier.auth })).status).toBe(429);
  const banned = await through('/v1/pets', { auth: retrier.auth });
  expectRefusal(banned, 429, 'temporarily_banned');
  expect(Number(banned.headers.get('retry-after'))).toBeGreaterThan(800);
});

it('GET /v1/usage reaches the public listener, and answers without spending a unit', async () => {
  const key = await createKey(a, { plan: 'pro' });
  const usage = await through('/v1/usage', { auth: key.auth });
  expect(usage.status).toBe(200);
  expect(usage.body).toMatchObject({ plan: 'pro' });
  expect((await usageOf(a, key.id)).day.remaining).toBe(10000);
});

it('outside /v1, NGINX answers 404 with the Error body, asking no one', async () => {
  expectRefusal(await through('/healthz'), 404, 'not_found');
});

it('with no decision listener answering, NGINX fails closed: 503 with Retry-After and the Error body', async () => {
  const nobody = `http://127.0.0.1:${await freePort()}`;
  const targets = {
    gateway1: { authz: nobody, public: a.gatewayUrl },
    gateway2: { authz: nobody, public: b.gatewayUrl },
    inventory: a.inventory!.url,
  };
  const orphan = await startNginx((port) => docsNginxConfig(targets, port));
  try {
    const key = await createKey(a, { plan: 'pro' });
    const res = await fetch(`${orphan.url}/v1/pets`, { headers: { authorization: key.auth } });
    const answer = { status: res.status, headers: res.headers, body: JSON.parse(await res.text()) as unknown };
    expectRefusal(answer, 503, 'service_unavailable');
    expect(answer.headers.get('retry-after')).toBe('1');
  } finally {
    await orphan.stop();
  }
});

it('NGINX logged no error while the gateways answered: every refusal reached its error page as a 401 or 403', () => {
  expect(nginx.errorLog()).not.toMatch(/\[(error|crit|alert|emerg)\]/);
});
