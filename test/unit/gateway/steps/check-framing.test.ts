import { checkFraming } from '../../../../src/gateway/steps/check-framing';
import { HOST_NOT_AUTHORITY, NO_TUNNEL, Refusal } from '../../../../src/gateway/refusals';
import { CONTINUE } from '../../../../src/gateway/step-outcome';
import { gatewayRequest, incoming } from './step-kit';

/** A request as node:http2's compatibility API hands it over (or HTTP/1.x's parser), through the handler's start. */
function framed(httpVersionMajor: number, method: string, headers: Record<string, string>) {
  const req = incoming(method, '/v1/pets');
  req.httpVersionMajor = httpVersionMajor;
  req.httpVersion = `${httpVersionMajor}.0`;
  req.headers = headers;
  return gatewayRequest(req);
}

/** Issue 42: what HTTP/2 hands over that the HTTP/1.1 parser never would. */
describe('HTTP/2 framing step', () => {
  it('refuses CONNECT with 405 and an empty Allow', () => {
    const outcome = checkFraming(framed(2, 'CONNECT', { ':authority': 'db:5432' }));
    expect(outcome).toBe(NO_TUNNEL);
    expect(outcome).toEqual(
      new Refusal('method_not_allowed', 'CONNECT is not allowed: the gateway opens no tunnels.', { Allow: '' }),
    );
  });

  it('refuses a host naming another authority, compared without case', () => {
    expect(HOST_NOT_AUTHORITY).toEqual(
      new Refusal('malformed_request', 'The Host header names another authority than :authority.'),
    );
    expect(checkFraming(framed(2, 'GET', { ':authority': 'api.example:443', host: 'evil.example' }))).toBe(
      HOST_NOT_AUTHORITY,
    );
    expect(checkFraming(framed(2, 'GET', { ':authority': 'api.example:443', host: 'api.example' }))).toBe(
      HOST_NOT_AUTHORITY,
    );
    expect(checkFraming(framed(2, 'GET', { ':authority': 'api.example:443', host: 'API.example:443' }))).toBe(CONTINUE);
    expect(checkFraming(framed(2, 'GET', { ':authority': 'api.example:443' }))).toBe(CONTINUE);
    expect(checkFraming(framed(2, 'GET', { host: 'api.example' }))).toBe(CONTINUE);
  });

  it('lets HTTP/1.x through untouched', () => {
    expect(checkFraming(framed(1, 'CONNECT', { host: 'x' }))).toBe(CONTINUE);
    expect(checkFraming(framed(1, 'GET', { host: 'x', ':authority': 'y' }))).toBe(CONTINUE);
  });
});
