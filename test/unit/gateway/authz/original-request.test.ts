import type { IncomingMessage } from 'node:http';
import { originalRequestOf } from '../../../../src/gateway/authz/original-request';
import { Refusal } from '../../../../src/gateway/refusals';

/** The request an edge proxy asks about (CONTRACT §11): the line, or X-Original-* from a trusted proxy only. */
function incoming(method: string, url: string, headers: Record<string, string> = {}): IncomingMessage {
  return { method, url, headers } as unknown as IncomingMessage;
}

const NGINX_HEADERS = { 'x-original-method': 'POST', 'x-original-uri': '/v1/pets?x=1' };

describe('originalRequestOf', () => {
  it('reads the request line when no X-Original-URI came (Envoy, Gateway API)', () => {
    expect(originalRequestOf(incoming('DELETE', '/v1/pets/3'), true)).toEqual({
      method: 'DELETE',
      target: '/v1/pets/3',
      fromHeaders: false,
    });
  });

  it("reads X-Original-Method and X-Original-URI from a trusted proxy (NGINX's auth_request)", () => {
    expect(originalRequestOf(incoming('GET', '/_authz', NGINX_HEADERS), true)).toEqual({
      method: 'POST',
      target: '/v1/pets?x=1',
      fromHeaders: true,
    });
  });

  it("ignores them from any other peer: a client's own X-Original-URI chooses nothing", () => {
    expect(originalRequestOf(incoming('GET', '/v1/pets', NGINX_HEADERS), false)).toEqual({
      method: 'GET',
      target: '/v1/pets',
      fromHeaders: false,
    });
  });

  it.each([
    ['no method', { 'x-original-uri': '/v1/pets' }],
    ['an empty method', { 'x-original-uri': '/v1/pets', 'x-original-method': '' }],
    ['a method that is no token', { 'x-original-uri': '/v1/pets', 'x-original-method': 'GET /v1/usage' }],
  ])('refuses X-Original-URI with %s as a malformed request', (_label, headers) => {
    const outcome = originalRequestOf(incoming('GET', '/_authz', headers), true);
    expect(outcome).toBeInstanceOf(Refusal);
    expect((outcome as Refusal).code).toBe('malformed_request');
  });
});
