import { parseTarget } from '../../../src/gateway/request-target';

describe('parseTarget: the path the gateway routes on, and the origin form the inventory gets', () => {
  it.each([
    ['/v1/pets', '/v1/pets', '/v1/pets'],
    ['/v1/pets?limit=2&status=sold', '/v1/pets', '/v1/pets?limit=2&status=sold'],
    ['/v1/pets#x', '/v1/pets', '/v1/pets#x'],
    ['/v1/pets?x#y', '/v1/pets', '/v1/pets?x#y'],
    ['*', '*', '*'],
    // Absolute form: routed and forwarded on its path, whatever the scheme and host.
    ['http://example.com/v1/pets?limit=1', '/v1/pets', '/v1/pets?limit=1'],
    ['HTTP://EXAMPLE.COM/v1/pets', '/v1/pets', '/v1/pets'],
    ['foo://host/v1/pets/7', '/v1/pets/7', '/v1/pets/7'],
  ])('%s → path %s, forwarded as %s', (target, path, originForm) => {
    expect(parseTarget(target)).toEqual({ path, originForm });
  });

  it.each(['http://[::1/v1/pets', 'v1/pets', 'http://', ''])('%j is no URL: null (400 invalid_parameter)', (target) => {
    expect(parseTarget(target)).toBeNull();
  });
});
