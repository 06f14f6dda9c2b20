import type { Pet } from '../../../src/inventory/pet';
import { UPSTREAM_TOKEN_HEADER } from '../../../src/shared/http/upstream-token';
import { rawRequest, startTestInventory, type TestInventory } from '../../support/inventory-harness';

describe('inventory: add, get and list pets', () => {
  let inventory: TestInventory;

  beforeAll(async () => {
    inventory = await startTestInventory();
  });
  afterAll(async () => {
    await inventory.close();
  });

  it('POST /v1/pets answers 201 with the stored pet and its Location; GET at that Location returns it', async () => {
    const res = await inventory.post('/v1/pets', { name: 'Rex', categoryId: 3, status: 'pending' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.any(Number), name: 'Rex', categoryId: 3, status: 'pending' });
    const pet = res.body as Pet;
    expect(res.headers.location).toBe(`/v1/pets/${pet.id}`);
    const fetched = await inventory.get(res.headers.location!);
    expect(fetched.status).toBe(200);
    expect(fetched.body).toEqual(pet);
  });

  it('defaults status to available and stores the name trimmed', async () => {
    const pet = await inventory.createPet({ name: '\t  Bella \n', categoryId: 1 });
    expect(pet).toMatchObject({ name: 'Bella', status: 'available' });
    expect((await inventory.get(`/v1/pets/${pet.id}`)).body).toEqual(pet);
  });

  it('round-trips Unicode names up to 200 characters and the largest safe categoryId', async () => {
    const name = '🐈'.repeat(199) + 'é';
    const pet = await inventory.createPet({ name, categoryId: Number.MAX_SAFE_INTEGER, status: 'sold' });
    expect((await inventory.get(`/v1/pets/${pet.id}`)).body).toEqual({
      id: pet.id,
      name,
      categoryId: Number.MAX_SAFE_INTEGER,
      status: 'sold',
    });
  });

  it('accepts application/json with charset=utf-8', async () => {
    const res = await rawRequest(inventory.url, {
      method: 'POST',
      path: '/v1/pets',
      headers: { 'Content-Type': 'application/json; charset=UTF-8', [UPSTREAM_TOKEN_HEADER]: await inventory.token() },
      body: '{"name":"Charset","categoryId":2}',
    });
    expect(res.status).toBe(201);
  });

  it('assigns increasing ids and the list shows the pets in id order', async () => {
    const a = await inventory.createPet({ name: 'A', categoryId: 1 });
    const b = await inventory.createPet({ name: 'B', categoryId: 1 });
    expect(b.id).toBeGreaterThan(a.id);
    const list = (await inventory.get('/v1/pets?limit=100')).body as Pet[];
    expect(list.slice(-2)).toEqual([a, b]);
    expect(list.map((p) => p.id)).toEqual([...list.map((p) => p.id)].sort((x, y) => x - y));
  });

  it('filters by status', async () => {
    const sold = await inventory.createPet({ name: 'Sold one', categoryId: 1, status: 'sold' });
    const list = (await inventory.get('/v1/pets?status=sold&limit=100')).body as Pet[];
    expect(list.length).toBeGreaterThan(0);
    expect(list.every((p) => p.status === 'sold')).toBe(true);
    expect(list).toContainEqual(sold);
  });

  it('ignores query parameters it does not define', async () => {
    const res = await inventory.get('/v1/pets?limit=1&sort=name&page=9');
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(1);
  });

  it('answers concurrent creates with distinct ids, all stored', async () => {
    const before = inventory.countPets();
    const pets = await Promise.all(
      Array.from({ length: 20 }, (_, i) => inventory.createPet({ name: `Burst ${i}`, categoryId: 1 })),
    );
    expect(new Set(pets.map((p) => p.id)).size).toBe(20);
    expect(inventory.countPets()).toBe(before + 20);
  });
});
