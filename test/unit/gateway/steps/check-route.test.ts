import { matchRoute } from '../../../../src/gateway/operations/routes';
import { checkRoute, methodNotAllowed } from '../../../../src/gateway/steps/check-route';
import { CONTINUE, Refusal } from '../../../../src/gateway/step-outcome';
import { requestContext } from './step-kit';

const routed = (path: string) => requestContext({ path, originForm: path, route: matchRoute(path) });

describe('route check step', () => {
  it('a path under /v1 that names no route is 404 not_found', () => {
    expect(checkRoute('GET', routed('/v1/owners'))).toEqual(new Refusal('not_found', 'No such resource.'));
    expect(checkRoute('GET', routed('/v1/pets/1/photos'))).toEqual(new Refusal('not_found', 'No such resource.'));
  });

  it.each([
    ['DELETE', '/v1/pets', 'GET, HEAD, POST'],
    ['PUT', '/v1/pets/42', 'GET, HEAD'],
    ['POST', '/v1/pets/42', 'GET, HEAD'],
  ])('%s %s is 405 method_not_allowed with Allow: %s', (method, path, allow) => {
    expect(checkRoute(method, routed(path))).toEqual(new Refusal('method_not_allowed', `${method} is not allowed here.`, { Allow: allow }));
  });

  it.each([
    ['GET', '/v1/pets'],
    ['HEAD', '/v1/pets'],
    ['POST', '/v1/pets'],
    ['GET', '/v1/pets/42'],
    ['HEAD', '/v1/pets/42'],
  ])('%s %s continues', (method, path) => {
    expect(checkRoute(method, routed(path))).toBe(CONTINUE);
  });

  it('methodNotAllowed names the method and lists what the route answers', () => {
    const route = matchRoute('/v1/usage')!;
    expect(methodNotAllowed('PATCH', route)).toEqual(new Refusal('method_not_allowed', 'PATCH is not allowed here.', { Allow: 'GET, HEAD' }));
  });
});
