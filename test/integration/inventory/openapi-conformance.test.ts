import type { Pet } from '../../../src/inventory/pet';
import { UPSTREAM_TOKEN_HEADER } from '../../../src/shared/http/upstream-token';
import { expectMatchesOpenApi, expectMatchesSchema } from '../../support/openapi';
import { rawRequest, startTestInventory, type TestInventory } from '../../support/inventory-harness';

/**
 * Real responses of the bare inventory against openapi.yaml. Headers only the gateway adds
 * (rate limits, deprecation) are skipped here; the gateway's tests check them on its responses.
 */
const inventoryOnly = { skipGatewayHeaders: true };

describe('inventory responses match openapi.yaml', () => {
  let inventory: TestInventory;
  let pet: Pet;

  beforeAll(async () => {
    inventory = await startTestInventory();
    pet = await inventory.createPet({ name: 'Spec', categoryId: 1 });
    await inventory.createPet({ name: 'Spec 2', categoryId: 1, status: 'sold' });
  });
  afterAll(async () => {
    await inventory.close();
  });

  const send = async (method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
    rawRequest(inventory.url, {
      method,
      path,
      headers: { [UPSTREAM_TOKEN_HEADER]: await inventory.token(), ...headers },
      body,
    });

  it('200 listPets, with and without a next Link', async () => {
    const withLink = await send('GET', '/v1/pets?limit=1', {
      'X-Forwarded-Proto': 'https',
      'X-Forwarded-Host': 'api.animalstore.example',
    });
    expect(withLink.headers.link).toBeDefined();
    expectMatchesOpenApi('GET', '/pets', withLink, inventoryOnly);
    const lastPage = await send('GET', '/v1/pets?status=sold');
    expect(lastPage.headers.link).toBeUndefined();
    expectMatchesOpenApi('GET', '/pets', lastPage, inventoryOnly);
  });

  it('201 createPet', async () => {
    const res = await send(
      'POST',
      '/v1/pets',
      { 'Content-Type': 'application/json' },
      '{"name":"New","categoryId":4,"status":"pending"}',
    );
    expect(res.status).toBe(201);
    expectMatchesOpenApi('POST', '/pets', res, inventoryOnly);
  });

  it('200 getPet', async () => {
    const res = await send('GET', `/v1/pets/${pet.id}`);
    expect(res.status).toBe(200);
    expectMatchesOpenApi('GET', '/pets/{petId}', res, inventoryOnly);
  });

  it.each([
    ['GET', '/pets', '/v1/pets?limit=0', {}, undefined, 400],
    ['GET', '/pets', '/v1/pets?cursor=bogus', {}, undefined, 400],
    ['GET', '/pets/{petId}', '/v1/pets/abc', {}, undefined, 400],
    ['POST', '/pets', '/v1/pets', { 'Content-Type': 'application/json' }, '{"name":"x","categoryId":1,"id":1}', 400],
    ['POST', '/pets', '/v1/pets', { 'Content-Type': 'application/json' }, '{"name":', 400],
    ['POST', '/pets', '/v1/pets', {}, undefined, 400],
    ['GET', '/pets/{petId}', '/v1/pets/987654', {}, undefined, 404],
    [
      'POST',
      '/pets',
      '/v1/pets',
      { 'Content-Type': 'application/json' },
      `{"name":"${'x'.repeat(20_000)}","categoryId":1}`,
      413,
    ],
    ['POST', '/pets', '/v1/pets', { 'Content-Type': 'text/plain' }, 'Rex', 415],
  ] as const)('%s %s (%s) → %d', async (method, template, path, headers, body, status) => {
    const res = await send(method, path, headers, body);
    expect(res.status).toBe(status);
    expectMatchesOpenApi(method, template, res, inventoryOnly);
  });

  it.each([
    ['GET', '/pets', '/v1/pets'],
    ['POST', '/pets', '/v1/pets'],
    ['GET', '/pets/{petId}', '/v1/pets/1'],
  ] as const)('401 %s %s without a token', async (method, template, path) => {
    const res = await rawRequest(inventory.url, {
      method,
      path,
      headers: { 'Content-Type': 'application/json' },
      body: method === 'POST' ? '{}' : undefined,
    });
    expect(res.status).toBe(401);
    expectMatchesOpenApi(method, template, res, inventoryOnly);
  });

  it.each([
    ['DELETE', '/pets', '/v1/pets'],
    ['PUT', '/pets/{petId}', '/v1/pets/1'],
    ['POST', '/pets/{petId}', '/v1/pets/1'],
  ] as const)('405 %s %s lists exactly the documented methods in Allow', async (method, template, path) => {
    const res = await send(method, path);
    expect(res.status).toBe(405);
    expectMatchesOpenApi(method, template, res, inventoryOnly);
  });

  it('404 on an unknown /v1 path carries the Error body', async () => {
    const res = await send('GET', '/v1/owners');
    expect(res.status).toBe(404);
    expectMatchesSchema('NotFoundError', res.body);
  });

  it('without skipping gateway headers, the bare inventory is (rightly) reported as missing them', async () => {
    const res = await send('GET', `/v1/pets/${pet.id}`);
    expect(() => expectMatchesOpenApi('GET', '/pets/{petId}', res)).toThrow(
      /X-RateLimit-Limit: required but missing[\s\S]*/,
    );
  });
});
