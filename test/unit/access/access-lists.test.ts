import { accessListsOf, accessListsPatch, accessListsView, validAccessList } from '../../../src/access/access-lists';
import { ApiError } from '../../../src/shared/errors';

function refusal(run: () => unknown): ApiError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error('expected a 400');
}

describe('validAccessList: allowedOperations', () => {
  it('keeps the operation ids of openapi.yaml, in order, duplicates dropped', () => {
    expect(validAccessList('allowedOperations', ['getPet', 'listPets', 'getPet'])).toEqual(['getPet', 'listPets']);
  });

  it('refuses an unknown operation id with 400 naming it', () => {
    const err = refusal(() => validAccessList('allowedOperations', ['listPets', 'deletePet', 'ListPets']));
    expect(err.code).toBe('validation_failed');
    expect(err.status).toBe(400);
    expect(err.message).toContain('"deletePet"');
    expect(err.message).toContain('"ListPets"');
    expect(err.message).not.toContain('"listPets"');
  });

  it('refuses getUsage: GET /v1/usage is always allowed, listing it means nothing', () => {
    expect(refusal(() => validAccessList('allowedOperations', ['getUsage'])).message).toContain('"getUsage"');
  });

  it('null removes the list; an empty list is refused and says to send null', () => {
    expect(validAccessList('allowedOperations', null)).toBeNull();
    expect(refusal(() => validAccessList('allowedOperations', [])).message).toMatch(/empty.*null/);
  });

  it('refuses what is not a list, and entries that are not strings', () => {
    expect(refusal(() => validAccessList('allowedOperations', 'listPets')).message).toContain('must be an array');
    expect(refusal(() => validAccessList('allowedOperations', [7])).message).toContain('7');
  });
});

describe('validAccessList: allowedAddresses', () => {
  it('keeps addresses and ranges of both families, canonical', () => {
    expect(
      validAccessList('allowedAddresses', ['10.0.0.0/8', ' 192.0.2.7 ', '2001:DB8::/32', '::1', '0.0.0.0/0', '::/0']),
    ).toEqual(['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', '::1', '0.0.0.0/0', '::/0']);
  });

  it('stores an IPv4-mapped IPv6 address or range as the IPv4 one', () => {
    expect(validAccessList('allowedAddresses', ['::ffff:10.1.2.3', '::ffff:10.0.0.0/104'])).toEqual([
      '10.1.2.3',
      '10.0.0.0/8',
    ]);
  });

  it.each([
    '300.1.1.1/8',
    '10.0.0.0/33',
    '::1/129',
    'api.example.com',
    '10.0.0.0/',
    '10.0.0.0/-1',
    '10.0.0.0/8/8',
    'fe80::1%eth0',
    '1.2.3',
    '10.0.0.0/ 8',
    '',
  ])('refuses %j with 400 naming it', (entry) => {
    const err = refusal(() => validAccessList('allowedAddresses', ['192.0.2.0/24', entry]));
    expect(err.status).toBe(400);
    expect(err.message).toContain(JSON.stringify(entry));
    expect(err.message).not.toContain('"192.0.2.0/24"');
  });

  it('names every bad entry, up to ten', () => {
    const bad = Array.from({ length: 12 }, (_, i) => `host${i}.example`);
    const message = refusal(() => validAccessList('allowedAddresses', bad)).message;
    for (let i = 0; i < 10; i++) expect(message).toContain(`"host${i}.example"`);
    expect(message).toContain('and 2 more');
  });

  it('takes 100 entries and refuses 101', () => {
    const ranges = (n: number) => Array.from({ length: n }, (_, i) => `10.${i}.0.0/16`);
    expect(validAccessList('allowedAddresses', ranges(100))).toHaveLength(100);
    expect(refusal(() => validAccessList('allowedAddresses', ranges(101))).message).toContain('at most 100');
  });

  it('refuses an empty list, and says to send null', () => {
    expect(refusal(() => validAccessList('allowedAddresses', [])).message).toMatch(/empty.*null/);
  });
});

describe('accessListsPatch, accessListsOf, accessListsView', () => {
  it('a patch holds only the fields sent, null included', () => {
    expect(accessListsPatch({})).toEqual({});
    expect(accessListsPatch({ allowedOperations: null })).toEqual({ allowedOperations: null });
    expect(accessListsPatch({ allowedAddresses: ['10.0.0.1'] })).toEqual({ allowedAddresses: ['10.0.0.1'] });
  });

  it('a record without lists encodes no field, so it reads as before policies existed', () => {
    expect(accessListsOf({})).toEqual({});
    expect(accessListsOf({ allowedOperations: null })).toEqual({});
    expect(accessListsOf({ allowedOperations: ['listPets'] })).toEqual({ allowedOperations: ['listPets'] });
    expect(() => accessListsOf({ allowedAddresses: 'x' })).toThrow('allowedAddresses');
  });

  it('the admin view shows null for no list', () => {
    expect(accessListsView({})).toEqual({ allowedOperations: null, allowedAddresses: null });
    expect(accessListsView({ allowedAddresses: ['::1'] })).toEqual({
      allowedOperations: null,
      allowedAddresses: ['::1'],
    });
  });
});
