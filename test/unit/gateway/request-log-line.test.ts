import type { GatewayRequestSpan } from '../../../src/shared/telemetry/telemetry';
import type { RequestContext } from '../../../src/gateway/request-context';
import { requestLogLine } from '../../../src/gateway/request-log-line';
import { matchRoute } from '../../../src/gateway/operations/routes';

const request = (overrides: Partial<RequestContext> = {}): RequestContext => ({
  requestId: 'req-log',
  startedAt: 0n,
  clientAddress: '203.0.113.7',
  path: '/v1/pets',
  originForm: '/v1/pets',
  route: matchRoute('/v1/pets'),
  deprecation: null,
  plan: 'pro',
  keyId: 'key_0123456789abcdef01234567',
  rateLimitOutcome: 'allowed',
  storeFallback: null,
  upstreamStartedAt: 1n,
  upstreamMs: 2.5,
  span: null,
  refusedWith: null,
  ...overrides,
});

describe('requestLogLine', () => {
  it('an answered request: its id, method, route, protocol, status, timings, plan, key id, address and limiter outcome', () => {
    expect(
      requestLogLine(request(), { method: 'GET', route: '/v1/pets', status: 200, durationMs: 4.125, protocol: 'h2' }),
    ).toEqual({
      requestId: 'req-log',
      method: 'GET',
      route: '/v1/pets',
      protocol: 'h2',
      status: 200,
      durationMs: 4.125,
      upstreamMs: 2.5,
      plan: 'pro',
      keyId: 'key_0123456789abcdef01234567',
      clientAddress: '203.0.113.7',
      rateLimit: 'allowed',
      storeFallback: undefined,
    });
  });

  it('has no cutOff field when answered, and says why when cut off', () => {
    // As written: a field left undefined is not written (pino, as JSON.stringify, skips it).
    const answered = requestLogLine(request(), {
      method: 'GET',
      route: '/v1/pets',
      status: 200,
      durationMs: 1,
      protocol: 'http/1.1',
    });
    expect(JSON.parse(JSON.stringify(answered))).not.toHaveProperty('cutOff');
    expect(
      requestLogLine(request(), {
        method: 'POST',
        route: '/v1/pets',
        status: null,
        cutOff: 'ERR_HTTP_REQUEST_TIMEOUT',
        durationMs: 1,
        protocol: 'http/1.1',
      }),
    ).toMatchObject({
      status: null,
      cutOff: 'ERR_HTTP_REQUEST_TIMEOUT',
    });
  });

  it('names the fallback a decision was taken on', () => {
    expect(
      requestLogLine(request({ storeFallback: 'open' }), {
        method: 'GET',
        route: '/v1/pets',
        status: 200,
        durationMs: 1,
        protocol: 'http/1.1',
      }).storeFallback,
    ).toBe('open');
  });

  it('carries the trace ids of a traced request', () => {
    const span = {
      logFields: () => ({ trace_id: 'c'.repeat(32), span_id: 'd'.repeat(16) }),
    } as unknown as GatewayRequestSpan;
    expect(
      requestLogLine(request({ span }), {
        method: 'GET',
        route: '/v1/pets',
        status: 200,
        durationMs: 1,
        protocol: 'http/1.1',
      }),
    ).toMatchObject({ trace_id: 'c'.repeat(32), span_id: 'd'.repeat(16) });
  });

  it('never holds more of the caller than the key id: no header, no path with a query', () => {
    const line = requestLogLine(request({ originForm: '/v1/pets?api_key=asg_test_secret' }), {
      method: 'GET',
      route: '/v1/pets',
      status: 200,
      durationMs: 1,
      protocol: 'http/1.1',
    });
    expect(JSON.stringify(line)).not.toContain('asg_test_secret');
    for (const field of ['headers', 'authorization', 'originForm', 'path']) expect(line).not.toHaveProperty(field);
  });
});
