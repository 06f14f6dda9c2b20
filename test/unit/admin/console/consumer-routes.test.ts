import { consumerHref, parseRoute } from '../../../../src/admin/console/public/routes.js';

test('the consumers list and one consumer are sections the address can name', () => {
  expect(parseRoute('#/consumers')).toEqual({ section: 'consumers' });
  expect(parseRoute('#/consumers/con_0123456789abcdef01234567')).toEqual({
    section: 'consumer',
    id: 'con_0123456789abcdef01234567',
  });
  const id = 'con odd/id&more';
  expect(parseRoute(consumerHref(id))).toEqual({ section: 'consumer', id });
});
