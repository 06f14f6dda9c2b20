import type { IncomingMessage } from 'node:http';
import { checkFraming } from '../../../../src/gateway/steps/check-framing';
import { CONTINUE, Refusal } from '../../../../src/gateway/step-outcome';

const request = (httpVersionMajor: number, method: string, headers: Record<string, string>) => ({ httpVersionMajor, method, headers }) as unknown as IncomingMessage;

/** Issue 42: what HTTP/2 hands over that the HTTP/1.1 parser never would. */
describe('HTTP/2 framing step', () => {
  it('refuses CONNECT with 405 and an empty Allow', () => {
    expect(checkFraming(request(2, 'CONNECT', { ':authority': 'db:5432' }))).toEqual(new Refusal('method_not_allowed', 'CONNECT is not allowed: the gateway opens no tunnels.', { Allow: '' }));
  });

  it('refuses a host naming another authority, compared without case', () => {
    const refusal = new Refusal('malformed_request', 'The Host header names another authority than :authority.');
    expect(checkFraming(request(2, 'GET', { ':authority': 'api.example:443', host: 'evil.example' }))).toEqual(refusal);
    expect(checkFraming(request(2, 'GET', { ':authority': 'api.example:443', host: 'api.example' }))).toEqual(refusal);
    expect(checkFraming(request(2, 'GET', { ':authority': 'api.example:443', host: 'API.example:443' }))).toBe(CONTINUE);
    expect(checkFraming(request(2, 'GET', { ':authority': 'api.example:443' }))).toBe(CONTINUE);
    expect(checkFraming(request(2, 'GET', { host: 'api.example' }))).toBe(CONTINUE);
  });

  it('lets HTTP/1.x through untouched', () => {
    expect(checkFraming(request(1, 'CONNECT', { host: 'x' }))).toBe(CONTINUE);
    expect(checkFraming(request(1, 'GET', { host: 'x', ':authority': 'y' }))).toBe(CONTINUE);
  });
});
