import { keyHref, parseRoute } from '../../../../src/admin/console/public/routes.js';

test('each section the address can name', () => {
  expect(parseRoute('#/overview')).toEqual({ section: 'overview' });
  expect(parseRoute('#/keys')).toEqual({ section: 'keys' });
  expect(parseRoute('#/deprecations')).toEqual({ section: 'deprecations' });
  expect(parseRoute('#/audit')).toEqual({ section: 'audit' });
  expect(parseRoute('#/keys/key_0123456789abcdef01234567')).toEqual({
    section: 'key',
    id: 'key_0123456789abcdef01234567',
  });
});

test('anything else is the overview', () => {
  for (const hash of ['', '#', '#/', '#/nothing', '#/key', '#/sign-in'])
    expect(parseRoute(hash)).toEqual({ section: 'overview' });
});

test("a key's address survives the round trip, odd characters included", () => {
  const id = 'key with/slash&more';
  expect(parseRoute(keyHref(id))).toEqual({ section: 'key', id });
});
