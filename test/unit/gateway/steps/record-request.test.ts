import type { GatewayRequestSpan } from '../../../../src/shared/telemetry/telemetry';
import { markCutOff } from '../../../../src/gateway/cut-off';
import type { GatewayRequest, RateLimitOutcome } from '../../../../src/gateway/request-context';
import { matchRoute } from '../../../../src/gateway/operations/routes';
import { createRecordStep } from '../../../../src/gateway/steps/record-request';
import {
  counted,
  countedInAll,
  gatewayRequest,
  incoming,
  keyRecord,
  observations,
  sentFor,
  stepEnvironment,
} from './step-kit';

const key = keyRecord({ plan: 'pro' });

function setUp(withActivity = true) {
  const env = stepEnvironment();
  const keyActivity = { record: jest.fn() };
  const recordRequest = createRecordStep({
    metrics: env.metrics,
    logger: env.logger,
    keyActivity: withActivity ? keyActivity : undefined,
  });
  return { ...env, keyActivity, recordRequest };
}

/** The request answered in full, as when 'close' follows 'finish' on a live connection. */
async function answered(request: GatewayRequest, status: number, body = '{"ok":true}'): Promise<GatewayRequest> {
  request.res.statusCode = status;
  request.res.end(body);
  await sentFor(request);
  expect(request.res.writableFinished).toBe(true);
  return request;
}

/** A request of `key`, admitted by its limit, as the steps leave it. */
const keyedRequest = (method = 'GET', overrides: Partial<GatewayRequest> = {}) =>
  gatewayRequest(incoming(method, '/v1/pets', [['Host', 'gw.example']]), {
    requestId: 'req-rec',
    route: matchRoute('/v1/pets'),
    key,
    keyId: key.id,
    plan: 'pro',
    rateLimitOutcome: 'allowed',
    upstreamMs: 3.25,
    ...overrides,
  });

describe('record step', () => {
  it('an answered request is counted under method, route, status and plan, timed, and logged in one line', async () => {
    const { recordRequest, metrics, lines } = setUp();
    recordRequest(await answered(keyedRequest('GET'), 200));
    expect(
      await counted(metrics.httpRequests, { method: 'GET', route: '/v1/pets', status_code: '200', plan: 'pro' }),
    ).toBe(1);
    expect(await countedInAll(metrics.httpRequests)).toBe(1);
    expect(await observations(metrics.httpDuration, { method: 'GET', route: '/v1/pets', status_code: '200' })).toBe(1);
    const [line, ...others] = lines();
    expect(others).toEqual([]);
    expect(line).toEqual({
      level: 30,
      time: expect.any(String),
      service: 'animal-store-gateway',
      msg: 'request',
      requestId: 'req-rec',
      method: 'GET',
      route: '/v1/pets',
      protocol: 'http/1.1',
      status: 200,
      durationMs: expect.any(Number),
      upstreamMs: 3.25,
      plan: 'pro',
      keyId: key.id,
      clientAddress: '203.0.113.7',
      rateLimit: 'allowed',
    });
    expect(line!.durationMs as number).toBeGreaterThanOrEqual(0);
  });

  it('a request that matched no route is labelled unmatched; a fallback decision is in its line', async () => {
    const { recordRequest, metrics, lines } = setUp();
    const request = gatewayRequest(incoming('GET', '/v1/owners', [['Host', 'gw.example']]), {
      storeFallback: 'local',
      rateLimitOutcome: 'anonymous_limited',
    });
    recordRequest(await answered(request, 404));
    expect(
      await counted(metrics.httpRequests, { method: 'GET', route: 'unmatched', status_code: '404', plan: 'anonymous' }),
    ).toBe(1);
    expect(lines()[0]).toMatchObject({
      route: 'unmatched',
      status: 404,
      keyId: null,
      plan: 'anonymous',
      storeFallback: 'local',
      rateLimit: 'anonymous_limited',
    });
  });

  it.each<[RateLimitOutcome, 'admitted' | 'rateLimited' | 'banned']>([
    ['allowed', 'admitted'],
    ['shadow_limited', 'admitted'],
    ['limited', 'rateLimited'],
    ['banned', 'banned'],
  ])("a key's %s request is recorded in its usage as %s", async (outcome, usage) => {
    const { recordRequest, keyActivity } = setUp();
    recordRequest(
      await answered(
        keyedRequest('GET', { rateLimitOutcome: outcome }),
        outcome === 'limited' || outcome === 'banned' ? 429 : 200,
      ),
    );
    expect(keyActivity.record).toHaveBeenCalledTimes(1);
    expect(keyActivity.record).toHaveBeenCalledWith(key.id, usage);
  });

  it.each<[string, Partial<GatewayRequest>]>([
    ['a store error', { rateLimitOutcome: 'store_error' }],
    ['a request never limited (404 before the limiter, 401)', { rateLimitOutcome: null }],
    ['an anonymous request', { keyId: null, plan: 'anonymous', rateLimitOutcome: 'anonymous' }],
    ['an anonymous request over the limit', { keyId: null, plan: 'anonymous', rateLimitOutcome: 'anonymous_limited' }],
  ])("%s is not recorded in any key's usage", async (_name, overrides) => {
    const { recordRequest, keyActivity } = setUp();
    recordRequest(await answered(keyedRequest('GET', overrides), 503));
    expect(keyActivity.record).not.toHaveBeenCalled();
  });

  it('records without a key-activity store', async () => {
    const { recordRequest, metrics } = setUp(false);
    recordRequest(await answered(keyedRequest('HEAD'), 200, ''));
    expect(
      await counted(metrics.httpRequests, { method: 'HEAD', route: '/v1/pets', status_code: '200', plan: 'pro' }),
    ).toBe(1);
  });

  it('a request cut off before an answer started is counted under status 0 and logged with status null and why', async () => {
    const { recordRequest, metrics, lines, keyActivity } = setUp();
    recordRequest(keyedRequest('POST', { upstreamMs: null }));
    expect(
      await counted(metrics.httpRequests, { method: 'POST', route: '/v1/pets', status_code: '0', plan: 'pro' }),
    ).toBe(1);
    expect(lines()[0]).toMatchObject({
      requestId: 'req-rec',
      method: 'POST',
      route: '/v1/pets',
      status: null,
      cutOff: 'client closed the connection',
      upstreamMs: null,
    });
    // It was admitted by the limiter (a unit spent), so the key's usage counts it.
    expect(keyActivity.record).toHaveBeenCalledWith(key.id, 'admitted');
  });

  it('a cut-off node:http reported (a body past server.requestTimeoutMs) is logged with its reason', async () => {
    const { recordRequest, lines } = setUp();
    const request = keyedRequest('POST');
    markCutOff(request.res, 'ERR_HTTP_REQUEST_TIMEOUT');
    recordRequest(request);
    expect(lines()[0]).toMatchObject({ status: null, cutOff: 'ERR_HTTP_REQUEST_TIMEOUT' });
  });

  it('a response cut off mid-body is counted under status 0, never under the status its head carried, and says it was cut off', async () => {
    const { recordRequest, metrics, lines } = setUp();
    const request = keyedRequest();
    request.res.writeHead(200, { 'Content-Length': '100' });
    request.res.write('partial');
    recordRequest(request);
    expect(
      await counted(metrics.httpRequests, { method: 'GET', route: '/v1/pets', status_code: '0', plan: 'pro' }),
    ).toBe(1);
    expect(
      await counted(metrics.httpRequests, { method: 'GET', route: '/v1/pets', status_code: '200', plan: 'pro' }),
    ).toBe(0);
    expect(lines()[0]).toMatchObject({ status: null, cutOff: 'client closed the connection' });
  });

  it('a traced request ends its span with the outcome, and its log line carries the trace ids', async () => {
    const { recordRequest, lines } = setUp();
    const end = jest.fn();
    const span = {
      recording: true,
      end,
      logFields: () => ({ trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) }),
    } as unknown as GatewayRequestSpan;
    recordRequest(
      await answered(keyedRequest('GET', { span, rateLimitOutcome: 'limited', refusedWith: 'rate_limited' }), 429),
    );
    expect(end).toHaveBeenCalledWith({
      statusCode: 429,
      route: '/v1/pets',
      plan: 'pro',
      clientAddress: '203.0.113.7',
      rateLimit: 'limited',
      refusal: 'rate_limited',
    });
    expect(lines()[0]).toMatchObject({ trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) });
  });

  it('an unsampled span is not ended', async () => {
    const { recordRequest } = setUp();
    const end = jest.fn();
    const span = { recording: false, end, logFields: () => ({}) } as unknown as GatewayRequestSpan;
    recordRequest(await answered(keyedRequest('GET', { span }), 200));
    expect(end).not.toHaveBeenCalled();
  });
});
