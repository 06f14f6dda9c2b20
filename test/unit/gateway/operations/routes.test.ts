import { allowHeader, matchRoute, ROUTE_TEMPLATES } from '../../../../src/gateway/operations/routes';
import { BASE_PATH, OPERATIONS } from '../../../../src/shared/public-api';

describe('matchRoute', () => {
  it.each([
    ['/v1/pets', '/v1/pets', '/pets'],
    ['/v1/pets/', '/v1/pets', '/pets'],
    ['/v1/pets/1', '/v1/pets/{petId}', '/pets/{petId}'],
    ['/v1/pets/9007199254740991', '/v1/pets/{petId}', '/pets/{petId}'],
    // Any single segment is a petId here; the inventory answers 400 for a bad one.
    ['/v1/pets/abc', '/v1/pets/{petId}', '/pets/{petId}'],
    ['/v1/pets/-1', '/v1/pets/{petId}', '/pets/{petId}'],
  ])('%s → %s', (path, template, relativeTemplate) => {
    expect(matchRoute(path)).toMatchObject({ template, relativeTemplate });
  });

  it.each([
    '/v1',
    '/v1/',
    '/v1/owners',
    '/v1/pets/1/toys',
    '/v1/pets//',
    '/v1/pets/1/',
    '/v1/PETS',
    '/v1/usage/',
    '/v1/keys/revoke/',
    '/v1/keys',
    '/v1/petsx',
    '/pets',
    '/v2/pets',
    '',
  ])('%s matches nothing', (path) => {
    expect(matchRoute(path)).toBeNull();
  });

  it('every row of the operation table is matched, its method allowed on its route, and no other route exists', () => {
    for (const row of OPERATIONS) {
      const route = matchRoute(BASE_PATH + row.path.replace('{petId}', '7'))!;
      expect(route).toMatchObject({ template: BASE_PATH + row.path, relativeTemplate: row.path });
      expect(route.allowedMethods).toContain(row.method);
      expect(route.answeredByGateway).toBe('answeredByGateway' in row ? row.answeredByGateway : undefined);
    }
    expect(ROUTE_TEMPLATES).toEqual(['/v1/pets', '/v1/pets/{petId}', '/v1/usage', '/v1/keys/revoke']);
  });

  it('templates carry the base path; relative templates are what deprecations name', () => {
    const item = matchRoute('/v1/pets/7')!;
    expect(item.template).toBe(BASE_PATH + item.relativeTemplate);
  });
});

describe('allowHeader', () => {
  it('lists the methods of each route, HEAD with GET', () => {
    expect(allowHeader(matchRoute('/v1/pets')!)).toBe('GET, HEAD, POST');
    expect(allowHeader(matchRoute('/v1/pets/1')!)).toBe('GET, HEAD');
  });

  it('every allowed method is one the route answers', () => {
    expect(matchRoute('/v1/pets')!.allowedMethods).toEqual(['GET', 'HEAD', 'POST']);
    expect(matchRoute('/v1/pets/1')!.allowedMethods).toEqual(['GET', 'HEAD']);
  });
});
