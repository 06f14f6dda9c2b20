import type { DeprecationConfig } from '../../../../src/shared/config';
import { buildDeprecations } from '../../../../src/gateway/operations/deprecation';
import { matchRoute } from '../../../../src/gateway/operations/routes';
import { createOperationStep } from '../../../../src/gateway/steps/match-operation';
import { Refusal } from '../../../../src/gateway/refusals';
import { CONTINUE } from '../../../../src/gateway/step-outcome';
import { gatewayRequest, headersStartingWith, incoming } from './step-kit';

const deprecation: DeprecationConfig = {
  method: 'GET',
  path: '/pets/{petId}',
  deprecatedAt: '2026-01-01T00:00:00Z',
  sunset: '2026-06-01T00:00:00Z',
  successor: '/v2/pets/{petId}',
  docs: 'https://docs.example/deprecations',
};
const DEPRECATION_HEADERS = {
  deprecation: `@${Date.UTC(2026, 0, 1) / 1000}`,
  sunset: 'Mon, 01 Jun 2026 00:00:00 GMT',
  link: '</v2/pets/{petId}>; rel="successor-version", <https://docs.example/deprecations>; rel="deprecation"; type="text/html"',
};

function run(method: string, path: string | null, deprecations = buildDeprecations([deprecation])) {
  const matchOperation = createOperationStep(deprecations);
  const request = gatewayRequest(incoming(method, path ?? 'http://[::1/v1/pets'), { path });
  const outcome = matchOperation(request);
  return { outcome, res: request.res, request };
}

describe('operation step', () => {
  it('a target that is no URL is 400 invalid_parameter', () => {
    const { outcome, request } = run('GET', null);
    expect(outcome).toEqual(new Refusal('invalid_parameter', 'The request target is not a valid URL.'));
    expect(request.route).toBeNull();
  });

  it.each(['/', '/health', '/v2/pets', '/v10', '/v1pets', '*'])('%s lies outside /v1: 404 not_found', (path) => {
    const { outcome, request } = run('GET', path);
    expect(outcome).toEqual(new Refusal('not_found', 'No such resource. The API lives under /v1.'));
    expect(request.route).toBeNull();
  });

  it('a route under /v1 is matched and written into the request', () => {
    const { outcome, request, res } = run('GET', '/v1/pets');
    expect(outcome).toBe(CONTINUE);
    expect(request.route).toBe(matchRoute('/v1/pets'));
    expect(request.deprecation).toBeNull();
    expect(headersStartingWith(res, 'deprecation', 'sunset', 'link')).toEqual({});
  });

  it.each(['/v1', '/v1/owners'])(
    '%s, under /v1 but no route, continues: check-route refuses it once counted',
    (path) => {
      const { outcome, request } = run('GET', path);
      expect(outcome).toBe(CONTINUE);
      expect(request.route).toBeNull();
    },
  );

  it.each(['GET', 'HEAD'])(
    '%s of a deprecated operation sets its Deprecation, Sunset and Link headers and notes it',
    (method) => {
      const { outcome, request, res } = run(method, '/v1/pets/42');
      expect(outcome).toBe(CONTINUE);
      expect(request.route?.template).toBe('/v1/pets/{petId}');
      expect(request.deprecation).toMatchObject({
        id: 'GET /v1/pets/{petId}',
        template: '/v1/pets/{petId}',
        sunsetAt: Date.UTC(2026, 5, 1),
      });
      expect(headersStartingWith(res, 'deprecation', 'sunset', 'link')).toEqual(DEPRECATION_HEADERS);
    },
  );

  it('another method on the same route is not deprecated', () => {
    const { request, res } = run('PUT', '/v1/pets/42');
    expect(request.route?.template).toBe('/v1/pets/{petId}');
    expect(request.deprecation).toBeNull();
    expect(headersStartingWith(res, 'deprecation', 'sunset', 'link')).toEqual({});
  });

  it('without deprecations nothing is looked up or set', () => {
    const { outcome, request, res } = run('GET', '/v1/pets/42', new Map());
    expect(outcome).toBe(CONTINUE);
    expect(request.deprecation).toBeNull();
    expect(headersStartingWith(res, 'deprecation', 'sunset', 'link')).toEqual({});
  });
});
