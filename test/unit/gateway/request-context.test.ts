import { keyOf } from '../../../src/gateway/request-context';
import { gatewayRequest, incoming, keyRecord } from './steps/step-kit';

describe('GatewayRequest', () => {
  it("starts with Node's request and response, its method, and nothing learned yet", () => {
    const req = incoming('POST', '/v1/pets?limit=2');
    const request = gatewayRequest(req);
    expect(request.req).toBe(req);
    expect(request.res.req).toBe(req);
    expect(request).toMatchObject({
      method: 'POST',
      requestId: 'req-0001',
      path: '/v1/pets',
      originForm: '/v1/pets?limit=2',
      route: null,
      plan: 'anonymous',
      keyId: null,
      key: null,
      keyless: null,
      rateLimitOutcome: null,
      refusedWith: null,
    });
    expect(typeof request.startedAt).toBe('bigint');
  });

  it('keyOf gives the key authenticate found, and calls a key step without one a bug', () => {
    const key = keyRecord();
    expect(keyOf(gatewayRequest(undefined, { key }))).toBe(key);
    expect(() => keyOf(gatewayRequest())).toThrow('request req-0001 reached a key step without a usable key');
  });
});
