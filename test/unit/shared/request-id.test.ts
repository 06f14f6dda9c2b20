import { requestIdFor } from '../../../src/shared/request-id';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('requestIdFor', () => {
  it.each(['a', 'abc-123', 'A.b_c:d-e', '0'.repeat(128), '01HZX3J5Q8K2M4N6P8R0T2V4W6'])(
    'keeps the sane id %s',
    (id) => {
      expect(requestIdFor(id)).toBe(id);
    },
  );

  it.each([
    ['too long', 'x'.repeat(129)],
    ['empty', ''],
    ['a space', 'two words'],
    ['a comma (two ids joined)', 'one, two'],
    ['a semicolon', 'a;b'],
    ['a quote', 'a"b'],
    ['a slash', 'a/b'],
    ['angle brackets', '<x>'],
    ['non-ASCII', 'ïd'],
    ['a newline', 'a\nb'],
  ])('replaces an id with %s by a fresh UUID', (_label, id) => {
    const replaced = requestIdFor(id);
    expect(replaced).not.toBe(id);
    expect(replaced).toMatch(UUID);
  });

  it('makes one when none or several are sent', () => {
    expect(requestIdFor(undefined)).toMatch(UUID);
    expect(requestIdFor(['a', 'b'])).toMatch(UUID);
  });

  it('never makes the same id twice', () => {
    const ids = new Set(Array.from({ length: 1000 }, () => requestIdFor(undefined)));
    expect(ids.size).toBe(1000);
  });
});
