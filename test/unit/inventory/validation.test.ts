import { ApiError } from '../../../src/shared/errors';
import { isJsonContentType, parseListQuery, parseNewPet, parsePetId } from '../../../src/inventory/validation';
import { encodeCursor } from '../../../src/inventory/pagination-cursor';

function errorOf(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error('expected an ApiError');
}

describe('parseListQuery', () => {
  it('defaults to 20 from the start with no filter', () => {
    expect(parseListQuery('')).toEqual({ limit: 20, afterId: 0 });
  });

  it('reads limit, status and cursor, and ignores parameters it does not define', () => {
    expect(parseListQuery(`limit=5&status=sold&cursor=${encodeCursor(42)}&page=3&utm=x`)).toEqual({
      limit: 5,
      status: 'sold',
      afterId: 42,
    });
  });

  it.each(['1', '100', '020'])('accepts limit=%s', (limit) => {
    expect(parseListQuery(`limit=${limit}`).limit).toBe(Number(limit));
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['limit=-1', 'limit'],
    ['limit=1e2', 'limit'],
    ['limit=abc', 'limit'],
    ['limit=', 'limit'],
    ['limit=1.0', 'limit'],
    ['limit=%201', 'limit'],
    ['limit=99999999999999999999', 'limit'],
    ['limit[]=1', 'limit'],
    ['limit[a]=1', 'limit'],
    ['limit=1&limit=2', 'limit'],
    ['status=lost', 'status'],
    ['status=', 'status'],
    ['status=Sold', 'status'],
    ['status=sold&status=sold', 'status'],
    ['status[]=sold', 'status'],
    ['cursor=', 'cursor'],
    ['cursor=garbage!', 'cursor'],
    ['cursor=a&cursor=b', 'cursor'],
  ])('%s → invalid_parameter naming %s', (query, parameter) => {
    const err = errorOf(() => parseListQuery(query));
    expect(err.code).toBe('invalid_parameter');
    expect(err.message).toContain(`\`${parameter}\``);
  });
});

describe('parsePetId', () => {
  it.each([
    ['1', 1],
    ['42', 42],
    ['007', 7],
    ['9007199254740991', Number.MAX_SAFE_INTEGER],
  ])('accepts %s', (raw, id) => {
    expect(parsePetId(raw)).toBe(id);
  });

  it.each(['0', '-1', '1.5', '1e3', 'abc', '', ' 1', '9007199254740992', '99999999999999999999999', '0x10'])(
    'refuses %j',
    (raw) => {
      expect(errorOf(() => parsePetId(raw)).code).toBe('invalid_parameter');
    },
  );
});

describe('parseNewPet', () => {
  it('trims the name and defaults status to available', () => {
    expect(parseNewPet({ name: '  Rex \n', categoryId: 3 })).toEqual({
      name: 'Rex',
      categoryId: 3,
      status: 'available',
    });
  });

  it('counts code points, not UTF-16 units: 200 emoji are 200 characters', () => {
    const name = '🐶'.repeat(200);
    expect(parseNewPet({ name, categoryId: 1 }).name).toBe(name);
    expect(errorOf(() => parseNewPet({ name: name + '🐶', categoryId: 1 })).message).toContain('name');
  });

  it('accepts a 200-character name padded with whitespace beyond 200', () => {
    expect(parseNewPet({ name: `  ${'a'.repeat(200)}  `, categoryId: 1 }).name).toHaveLength(200);
  });

  it('accepts the largest safe categoryId', () => {
    expect(parseNewPet({ name: 'a', categoryId: Number.MAX_SAFE_INTEGER, status: 'sold' }).categoryId).toBe(
      Number.MAX_SAFE_INTEGER,
    );
  });

  it.each([
    [{ categoryId: 1 }, 'name: is required'],
    [{ name: '', categoryId: 1 }, 'name'],
    [{ name: '   ', categoryId: 1 }, 'name'],
    [{ name: 'a'.repeat(201), categoryId: 1 }, 'name'],
    [{ name: 5, categoryId: 1 }, 'name: must be a string'],
    [{ name: '\ud800', categoryId: 1 }, 'name'],
    [{ name: 'a' }, 'categoryId: is required'],
    [{ name: 'a', categoryId: 0 }, 'categoryId'],
    [{ name: 'a', categoryId: -3 }, 'categoryId'],
    [{ name: 'a', categoryId: 1.5 }, 'categoryId'],
    [{ name: 'a', categoryId: '1' }, 'categoryId'],
    [{ name: 'a', categoryId: 2 ** 53 }, 'categoryId'],
    [{ name: 'a', categoryId: 1, status: 'lost' }, 'status'],
    [{ name: 'a', categoryId: 1, status: null }, 'status'],
    [{ name: 'a', categoryId: 1, id: 7 }, 'id: is assigned by the service'],
    [{ name: 'a', categoryId: 1, color: 'red' }, 'color: is not a field of NewPet'],
    [JSON.parse('{"name":"a","categoryId":1,"__proto__":{"x":1}}'), '__proto__'],
    [[], 'JSON object'],
    [null, 'JSON object'],
    [5, 'JSON object'],
    ['pet', 'JSON object'],
  ])('%j → validation_failed mentioning %s', (body, fragment) => {
    const err = errorOf(() => parseNewPet(body));
    expect(err.code).toBe('validation_failed');
    expect(err.message).toContain(fragment);
  });
});

describe('isJsonContentType', () => {
  it.each([
    'application/json',
    'Application/JSON',
    'application/json; charset=utf-8',
    'application/json;charset="UTF-8"',
    'application/json; charset=utf-8;',
  ])('accepts %j', (header) => {
    expect(isJsonContentType(header)).toBe(true);
  });

  it.each([
    undefined,
    '',
    'text/plain',
    'application/xml',
    'application/json-patch+json',
    'application/jsonx',
    'application/json; charset=latin1',
    'application/json; charset=utf-16',
  ])('refuses %j', (header) => {
    expect(isJsonContentType(header)).toBe(false);
  });
});
