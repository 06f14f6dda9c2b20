import { SignJWT } from 'jose';
import { ManualClock } from '../../../src/shared/clock';
import { UPSTREAM_TOKEN_HEADER } from '../../../src/shared/http/upstream-token';
import type { ErrorCode } from '../../../src/shared/errors';
import { rawRequest, startTestInventory, tokenSigner, type TestInventory } from '../../support/inventory-harness';

/**
 * The inventory trusts only the gateway (CONTRACT §7): without a valid signed token nothing is
 * read or written, whatever else is wrong with the request.
 */

type TokenMaker = (inventory: TestInventory) => Promise<Record<string, string>>;

const claims = { keyId: 'key-1', plan: 'free' };

const tokenCases: Array<[string, TokenMaker, ErrorCode]> = [
  ['no token', async () => ({}), 'missing_api_key'],
  ['an empty token', async () => ({ [UPSTREAM_TOKEN_HEADER]: '' }), 'missing_api_key'],
  [
    'the key in Authorization instead of a gateway token',
    async () => ({ Authorization: 'Bearer asg_dev_abcdef' }),
    'missing_api_key',
  ],
  ['garbage', async () => ({ [UPSTREAM_TOKEN_HEADER]: 'not-a-jwt' }), 'invalid_api_key'],
  ['a token over 4096 characters', async () => ({ [UPSTREAM_TOKEN_HEADER]: 'a'.repeat(5000) }), 'invalid_api_key'],
  [
    'a token forged with another secret',
    async (inv) => ({
      [UPSTREAM_TOKEN_HEADER]: await tokenSigner(inv.config, {
        secret: 'another-secret-of-at-least-32-characters',
      }).sign(claims),
    }),
    'invalid_api_key',
  ],
  [
    'an expired token',
    async (inv) => ({
      [UPSTREAM_TOKEN_HEADER]: await tokenSigner(inv.config, {}, new ManualClock(Date.now() - 10 * 60_000)).sign(
        claims,
      ),
    }),
    'invalid_api_key',
  ],
  [
    'a token for another audience',
    async (inv) => ({
      [UPSTREAM_TOKEN_HEADER]: await tokenSigner(inv.config, { audience: 'someone-else' }).sign(claims),
    }),
    'invalid_api_key',
  ],
  [
    'a token from another issuer',
    async (inv) => ({
      [UPSTREAM_TOKEN_HEADER]: await tokenSigner(inv.config, { issuer: 'not-the-gateway' }).sign(claims),
    }),
    'invalid_api_key',
  ],
  [
    'an unsigned token (alg none)',
    async (inv) => {
      const now = Math.floor(Date.now() / 1000);
      const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
      const payload = {
        sub: 'key-1',
        plan: 'free',
        iss: inv.config.signing.issuer,
        aud: inv.config.signing.audience,
        iat: now,
        exp: now + 60,
      };
      return { [UPSTREAM_TOKEN_HEADER]: `${part({ alg: 'none', typ: 'JWT' })}.${part(payload)}.` };
    },
    'invalid_api_key',
  ],
  [
    'a correctly signed token without the plan claim',
    async (inv) => {
      const token = await new SignJWT({})
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject('key-1')
        .setIssuer(inv.config.signing.issuer)
        .setAudience(inv.config.signing.audience)
        .setIssuedAt()
        .setExpirationTime('1m')
        .sign(new TextEncoder().encode(inv.config.signing.secret!));
      return { [UPSTREAM_TOKEN_HEADER]: token };
    },
    'invalid_api_key',
  ],
];

describe('inventory: only requests signed by the gateway are served', () => {
  let inventory: TestInventory;

  beforeAll(async () => {
    inventory = await startTestInventory();
    await inventory.createPet({ name: 'Secret', categoryId: 9 });
  });
  afterAll(async () => {
    await inventory.close();
  });

  describe.each(tokenCases)('with %s', (_label, makeHeaders, code) => {
    const requests: Array<{
      label: string;
      method: string;
      path: string;
      headers?: Record<string, string>;
      body?: string;
    }> = [
      {
        label: 'a valid create',
        method: 'POST',
        path: '/v1/pets',
        headers: { 'Content-Type': 'application/json' },
        body: '{"name":"Intruder","categoryId":1}',
      },
      {
        label: 'an oversized create (no 413 before auth)',
        method: 'POST',
        path: '/v1/pets',
        headers: { 'Content-Type': 'application/json' },
        body: `{"name":"${'x'.repeat(40_000)}","categoryId":1}`,
      },
      {
        label: 'a text/plain create (no 415 before auth)',
        method: 'POST',
        path: '/v1/pets',
        headers: { 'Content-Type': 'text/plain' },
        body: 'hello',
      },
      { label: 'a list', method: 'GET', path: '/v1/pets' },
      { label: 'a get', method: 'GET', path: '/v1/pets/1' },
      { label: 'an unknown /v1 path (no 404 before auth)', method: 'GET', path: '/v1/secrets' },
      { label: 'a wrong method (no 405 before auth)', method: 'DELETE', path: '/v1/pets/1' },
    ];

    it.each(requests)(`$label → 401 ${code}, nothing written or shown`, async (r) => {
      const before = inventory.countPets();
      const res = await rawRequest(inventory.url, {
        method: r.method,
        path: r.path,
        headers: { ...r.headers, ...(await makeHeaders(inventory)) },
        body: r.body,
      });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ code, message: expect.stringContaining('signed by the gateway'), status: 401 });
      expect(res.text).not.toContain('Secret');
      expect(res.headers['x-request-id']).toEqual(expect.any(String));
      expect(inventory.countPets()).toBe(before);
    });
  });

  it('the same requests with a valid token are served (the 401s above come from the token alone)', async () => {
    const token = await inventory.token();
    const created = await rawRequest(inventory.url, {
      method: 'POST',
      path: '/v1/pets',
      headers: { 'Content-Type': 'application/json', [UPSTREAM_TOKEN_HEADER]: token },
      body: '{"name":"Welcome","categoryId":1}',
    });
    expect(created.status).toBe(201);
    const fetched = await rawRequest(inventory.url, {
      method: 'GET',
      path: '/v1/pets/1',
      headers: { [UPSTREAM_TOKEN_HEADER]: token },
    });
    expect(fetched.body).toEqual({ id: 1, name: 'Secret', categoryId: 9, status: 'available' });
  });

  it('health endpoints and unknown paths outside /v1 need no token', async () => {
    expect((await rawRequest(inventory.url, { method: 'GET', path: '/healthz' })).status).toBe(200);
    expect((await rawRequest(inventory.url, { method: 'GET', path: '/readyz' })).status).toBe(200);
    expect((await rawRequest(inventory.url, { method: 'GET', path: '/elsewhere' })).body).toMatchObject({
      code: 'not_found',
      status: 404,
    });
  });
});
