import Database from 'better-sqlite3';
import type { Pet, PetStatus } from '../../../src/inventory/pet';
import { decodeCursor } from '../../../src/inventory/pagination-cursor';
import { startTestInventory, type TestInventory } from '../../support/inventory-harness';

const statusCycle: PetStatus[] = ['available', 'sold', 'pending', 'sold', 'available'];

/** `<url>; rel="next"` → url, or null without a next link. */
function nextUrl(link: string | undefined): string | null {
  if (link === undefined) return null;
  const match = /^<([^>]+)>; rel="next"$/.exec(link);
  if (!match) throw new Error(`malformed Link header: ${link}`);
  return match[1]!;
}

function allIdsInDatabase(inventory: TestInventory, status?: PetStatus): number[] {
  const db = new Database(inventory.databaseFile, { readonly: true });
  try {
    const rows = (
      status
        ? db.prepare('SELECT id FROM pets WHERE status = ? ORDER BY id').all(status)
        : db.prepare('SELECT id FROM pets ORDER BY id').all()
    ) as { id: number }[];
    return rows.map((r) => r.id);
  } finally {
    db.close();
  }
}

/**
 * Follows `Link: rel="next"` from `firstPath` to the last page, calling `between` after each page
 * (to add pets mid-walk). Returns every pet seen, in order, and the number of pages.
 */
async function walk(
  inventory: TestInventory,
  firstPath: string,
  between: (page: number) => Promise<void> = async () => {},
): Promise<{ pets: Pet[]; pages: number; links: string[] }> {
  const pets: Pet[] = [];
  const links: string[] = [];
  let path: string | null = firstPath;
  let pages = 0;
  while (path !== null) {
    const res = await inventory.get(path);
    expect(res.status).toBe(200);
    pets.push(...(res.body as Pet[]));
    pages += 1;
    if (pages > 200) throw new Error('walk does not end');
    const next = nextUrl(res.headers.link as string | undefined);
    if (next) {
      links.push(next);
      const url = new URL(next);
      path = url.pathname + url.search;
    } else {
      path = null;
    }
    await between(pages);
  }
  return { pets, pages, links };
}

describe('inventory: keyset pagination over GET /v1/pets', () => {
  let inventory: TestInventory;
  let created = 0;
  const addPets = async (n: number) => {
    for (let i = 0; i < n; i += 1) {
      await inventory.createPet({
        name: `Pet ${created}`,
        categoryId: 1 + (created % 4),
        status: statusCycle[created % statusCycle.length],
      });
      created += 1;
    }
  };

  beforeAll(async () => {
    inventory = await startTestInventory();
  });
  afterAll(async () => {
    await inventory.close();
  });

  it('an empty inventory lists [] with no Link', async () => {
    const res = await inventory.get('/v1/pets');
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
    expect(res.headers.link).toBeUndefined();
  });

  it('with exactly `limit` pets there is one page and no Link; one more pet adds a second page', async () => {
    await addPets(5);
    const exact = await inventory.get('/v1/pets?limit=5');
    expect((exact.body as Pet[]).map((p) => p.id)).toEqual([1, 2, 3, 4, 5]);
    expect(exact.headers.link).toBeUndefined();

    const firstOfTwo = await inventory.get('/v1/pets?limit=4');
    expect((firstOfTwo.body as Pet[]).map((p) => p.id)).toEqual([1, 2, 3, 4]);
    const next = nextUrl(firstOfTwo.headers.link as string);
    expect(next).not.toBeNull();
    const last = await inventory.get(new URL(next!).pathname + new URL(next!).search);
    expect((last.body as Pet[]).map((p) => p.id)).toEqual([5]);
    expect(last.headers.link).toBeUndefined();
  });

  it('defaults to 20 per page and says so in the Link', async () => {
    await addPets(25);
    const res = await inventory.get('/v1/pets');
    expect(res.body).toHaveLength(20);
    expect(new URL(nextUrl(res.headers.link as string)!).searchParams.get('limit')).toBe('20');
  });

  it('a walk without a filter sees every pet exactly once, in id order, while pets are added between pages', async () => {
    const { pets, pages } = await walk(inventory, '/v1/pets?limit=7', async (page) => {
      if (page <= 3) await addPets(4);
    });
    const ids = pets.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    // Pets added mid-walk have larger ids, so a keyset walk reaches them too: nothing is skipped.
    expect(ids).toEqual(allIdsInDatabase(inventory));
    expect(pages).toBe(Math.ceil(ids.length / 7));
  });

  it('a walk with a status filter sees every pet of that status exactly once while others are added', async () => {
    const { pets, links } = await walk(inventory, '/v1/pets?limit=3&status=sold', async (page) => {
      if (page <= 4) await addPets(3);
    });
    const ids = pets.map((p) => p.id);
    expect(pets.every((p) => p.status === 'sold')).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(allIdsInDatabase(inventory, 'sold'));
    expect(links.length).toBeGreaterThan(2);
    for (const link of links) {
      const url = new URL(link);
      expect(url.searchParams.get('limit')).toBe('3');
      expect(url.searchParams.get('status')).toBe('sold');
    }
  });

  it('the Link is an absolute URL to /v1/pets on the Host the request used, keeping limit and status, not unknown parameters', async () => {
    const res = await inventory.get('/v1/pets?limit=2&status=available&utm_source=x');
    const url = new URL(nextUrl(res.headers.link as string)!);
    expect(url.origin).toBe(inventory.url);
    expect(url.pathname).toBe('/v1/pets');
    expect([...url.searchParams.keys()]).toEqual(['limit', 'status', 'cursor']);
    expect(url.searchParams.get('limit')).toBe('2');
    expect(url.searchParams.get('status')).toBe('available');
    expect(decodeCursor(url.searchParams.get('cursor')!)).toBe((res.body as Pet[])[1]!.id);
  });

  it('the Link uses X-Forwarded-Proto and X-Forwarded-Host when the gateway sets them', async () => {
    const res = await inventory.get('/v1/pets?limit=1', {
      'X-Forwarded-Proto': 'https',
      'X-Forwarded-Host': 'api.animalstore.example',
    });
    const url = new URL(nextUrl(res.headers.link as string)!);
    expect(url.origin).toBe('https://api.animalstore.example');
    expect(url.pathname).toBe('/v1/pets');
  });

  it('a cursor continues strictly after the pet it names', async () => {
    const first = await inventory.get('/v1/pets?limit=3');
    const next = new URL(nextUrl(first.headers.link as string)!);
    const second = await inventory.get(next.pathname + next.search);
    expect((second.body as Pet[])[0]!.id).toBe((first.body as Pet[])[2]!.id + 1);
  });

  it('limit=100 returns at most 100', async () => {
    await addPets(60);
    const res = await inventory.get('/v1/pets?limit=100');
    expect(res.body).toHaveLength(100);
    expect(res.headers.link).toBeDefined();
  });
});
