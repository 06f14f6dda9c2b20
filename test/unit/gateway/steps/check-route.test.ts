import { matchRoute } from '../../../../src/gateway/operations/routes';
import { checkRoute } from '../../../../src/gateway/steps/check-route';
import { Refusal } from '../../../../src/gateway/refusals';
import { CONTINUE } from '../../../../src/gateway/step-outcome';
import { gatewayRequest, incoming } from './step-kit';

/** A request whose operation was matched (or found unknown) by match-operation. */
const routed = (method: string, path: string) => gatewayRequest(incoming(method, path), { route: matchRoute(path) });

describe('route check step', () => {
  it('a path under /v1 that names no route is 404 not_found', () => {
    expect(checkRoute(routed('GET', '/v1/owners'))).toEqual(new Refusal('not_found', 'No such resource.'));
    expect(checkRoute(routed('GET', '/v1/pets/1/photos'))).toEqual(new Refusal('not_found', 'No such resource.'));
  });

  it.each([
    ['DELETE', '/v1/pets', 'GET, HEAD, POST'],
    ['PUT', '/v1/pets/42', 'GET, HEAD'],
    ['POST', '/v1/pets/42', 'GET, HEAD'],
  ])('%s %s is 405 method_not_allowed with Allow: %s', (method, path, allow) => {
    expect(checkRoute(routed(method, path))).toEqual(
      new Refusal('method_not_allowed', `${method} is not allowed here.`, { Allow: allow }),
    );
  });

  it.each([
    ['GET', '/v1/pets'],
    ['HEAD', '/v1/pets'],
    ['POST', '/v1/pets'],
    ['GET', '/v1/pets/42'],
    ['HEAD', '/v1/pets/42'],
  ])('%s %s continues', (method, path) => {
    expect(checkRoute(routed(method, path))).toBe(CONTINUE);
  });
});
