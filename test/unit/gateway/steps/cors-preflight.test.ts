import { createCorsPolicy } from '../../../../src/gateway/cors';
import { createPreflightStep } from '../../../../src/gateway/steps/cors-preflight';
import { ANSWERED, CONTINUE } from '../../../../src/gateway/step-outcome';
import { parseTarget } from '../../../../src/gateway/request-target';
import { gatewayRequest, headersStartingWith, incoming, sentFor } from './step-kit';

const APP = 'https://app.example';
const listed = createCorsPolicy({ allowedOrigins: [APP], maxAgeSeconds: 600 });

function preflight(
  options: {
    method?: string;
    url?: string;
    origin?: string;
    requestMethod?: string | null;
    cors?: ReturnType<typeof createCorsPolicy> | null;
  } = {},
) {
  const url = options.url ?? '/v1/pets/42';
  const headers: Array<[string, string]> = [['Host', 'gw.example']];
  if (options.origin !== undefined) headers.push(['Origin', options.origin]);
  if (options.requestMethod !== null) headers.push(['Access-Control-Request-Method', options.requestMethod ?? 'GET']);
  const request = gatewayRequest(incoming(options.method ?? 'OPTIONS', url, headers), {
    path: parseTarget(url)?.path ?? null,
  });
  const outcome = createPreflightStep(options.cors === undefined ? listed : options.cors)(request);
  return { outcome, res: request.res, request, sent: () => sentFor(request) };
}

describe('CORS preflight step', () => {
  it("a preflight from a listed origin for an API path is answered 204 with the route's methods, no key needed", async () => {
    const { outcome, request, sent } = preflight({ origin: APP });
    expect(outcome).toBe(ANSWERED);
    expect(request.route?.template).toBe('/v1/pets/{petId}');
    const response = await sent();
    expect(response.statusLine).toBe('HTTP/1.1 204 No Content');
    expect(response.headers).toMatchObject({
      'access-control-allow-origin': APP,
      'access-control-allow-methods': 'GET, HEAD',
      'access-control-allow-headers': 'Authorization, Content-Type, X-Request-Id',
      'access-control-max-age': '600',
      vary: 'Origin',
    });
    expect(response.body).toBe('');
  });

  it('a path under /v1 without a route offers the methods any route answers', () => {
    const { outcome, res, request } = preflight({ origin: APP, url: '/v1/owners' });
    expect(outcome).toBe(ANSWERED);
    expect(request.route).toBeNull();
    expect(res.getHeader('access-control-allow-methods')).toBe('GET, HEAD, POST');
  });

  it('with origins listed as *, any origin is answered with * and no Vary', () => {
    const { outcome, res } = preflight({
      origin: 'https://elsewhere.example',
      cors: createCorsPolicy({ allowedOrigins: ['*'], maxAgeSeconds: 60 }),
    });
    expect(outcome).toBe(ANSWERED);
    expect(res.getHeader('access-control-allow-origin')).toBe('*');
    expect(res.getHeader('vary')).toBeUndefined();
  });

  it.each([
    ['an unlisted origin', { origin: 'https://evil.example' }],
    ['no Origin at all', {}],
    ['a path outside the API', { origin: APP, url: '/health' }],
    ['a target that is no URL', { origin: APP, url: 'http://[::1/v1/pets' }],
    ['OPTIONS without Access-Control-Request-Method (no preflight)', { origin: APP, requestMethod: null }],
    ['another method', { origin: APP, method: 'GET' }],
    ['CORS off', { origin: APP, cors: null }],
  ] as const)('%s continues, with nothing written', (_name, options) => {
    const { outcome, res } = preflight(options);
    expect(outcome).toBe(CONTINUE);
    expect(headersStartingWith(res, 'access-control', 'vary')).toEqual({});
    expect(res.headersSent).toBe(false);
    expect(res.writableEnded).toBe(false);
  });
});
