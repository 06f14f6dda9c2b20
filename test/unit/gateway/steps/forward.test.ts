import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { ManualClock } from '../../../../src/shared/clock';
import { UpstreamTokenSigner, UpstreamTokenVerifier, type UpstreamTokenSettings } from '../../../../src/shared/upstream-token';
import type { ForwardHandlers, Forwarder } from '../../../../src/gateway/upstream/forward-contract';
import { matchRoute } from '../../../../src/gateway/operations/routes';
import { createForwardStep } from '../../../../src/gateway/steps/forward';
import { NOW, counted, incoming, keyRecord, observations, outgoing, requestContext, stepEnvironment } from './step-kit';

const SIGNING: UpstreamTokenSettings = { secret: 'unit-test-signing-secret-0123456789', issuer: 'animal-store-gateway', audience: 'animal-store-inventory', tokenTtlSeconds: 60 };
const MAX_BODY = 1024;
const PRESENTED = 'asg_test_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z';
const key = keyRecord({ plan: 'pro' });

/** What the forwarder was handed: the headers and target as they stood when forwarding began. */
interface Forwarded {
  headers: IncomingHttpHeaders;
  url: string | undefined;
  handlers: ForwardHandlers;
  res: ServerResponse;
}

function fakeForwarder() {
  const calls: Forwarded[] = [];
  const abandon = jest.fn();
  const forwarder: Forwarder = {
    forward(req: IncomingMessage, res: ServerResponse, handlers: ForwardHandlers) {
      calls.push({ headers: { ...req.headers }, url: req.url, handlers, res });
      return abandon;
    },
    stats: () => ({ activeRequests: 0, openConnections: 0 }),
    close: () => {},
  };
  return { forwarder, calls, abandon };
}

function setUp(publicBaseUrl: string | null = null) {
  const env = stepEnvironment();
  const clock = new ManualClock(NOW);
  const signer = new UpstreamTokenSigner(SIGNING, clock);
  const sign = jest.spyOn(signer, 'sign');
  const { forwarder, calls, abandon } = fakeForwarder();
  const forward = createForwardStep({ forwarder, signer, metrics: env.metrics, logger: env.logger, maxBodyBytes: MAX_BODY, publicBaseUrl });
  const verifier = new UpstreamTokenVerifier(SIGNING, clock);
  return { ...env, forward, calls, abandon, sign, verifier };
}

const CLIENT_HEADERS: Array<[string, string]> = [
  ['Host', 'gw.example:8080'],
  ['Authorization', `Bearer ${PRESENTED}`],
  ['Proxy-Authorization', 'Basic cHJveHk6c2VjcmV0'],
  ['Cookie', 'session=abc'],
  ['Connection', 'keep-alive, X-Hop'],
  ['Keep-Alive', 'timeout=5'],
  ['X-Hop', 'hop by hop'],
  ['TE', 'trailers'],
  ['Upgrade', 'websocket'],
  ['Expect', '100-continue'],
  ['Forwarded', 'for=198.51.100.1'],
  ['X-Forwarded-For', '198.51.100.1'],
  ['X-Forwarded-Host', 'forged.example'],
  ['X-Forwarded-Proto', 'https'],
  ['X-Real-IP', '198.51.100.1'],
  ['X-Gateway-Token', 'forged-token'],
  ['X-Gateway-Key-Id', 'key_forged'],
  ['Accept', 'application/json'],
  ['Content-Type', 'application/json'],
  ['Content-Length', '17'],
  ['User-Agent', 'unit-test/1.0'],
  ['X-Request-Id', 'client-chosen-id'],
];

const petsRequest = (overrides = {}) =>
  requestContext({ requestId: 'req-fwd', clientAddress: '203.0.113.7', path: '/v1/pets', originForm: '/v1/pets?limit=2', route: matchRoute('/v1/pets'), keyId: key.id, plan: key.plan, ...overrides });

describe('forward step', () => {
  it('hands the forwarder the request in origin form with the gateway headers: token added, credentials, hop-by-hop and internal headers gone', async () => {
    const { forward, calls, verifier } = setUp();
    const req = incoming('POST', 'http://gw.example:8080/v1/pets?limit=2', CLIENT_HEADERS);
    const { res } = outgoing(req);
    await forward(req, res, petsRequest(), key.id);

    expect(calls).toHaveLength(1);
    const [{ headers, url }] = calls as [Forwarded];
    expect(url).toBe('/v1/pets?limit=2');
    expect(await verifier.verify(headers['x-gateway-token'] as string)).toEqual({ keyId: key.id, plan: 'pro' });
    const { ['x-gateway-token']: _token, ...rest } = headers;
    expect(rest).toEqual({
      host: 'gw.example:8080',
      accept: 'application/json',
      'content-type': 'application/json',
      'content-length': '17',
      'user-agent': 'unit-test/1.0',
      'x-request-id': 'req-fwd',
      'x-forwarded-for': '203.0.113.7',
      'x-forwarded-proto': 'http',
      'x-forwarded-host': 'gw.example:8080',
    });
    expect(JSON.stringify(headers)).not.toContain(PRESENTED);
  });

  it('with server.publicBaseUrl the inventory is told its scheme and host, not the client\'s Host', async () => {
    const { forward, calls } = setUp('https://api.example.com:8443');
    const req = incoming('GET', '/v1/pets', [['Host', 'internal-lb:8080']]);
    await forward(req, outgoing(req).res, petsRequest(), key.id);
    expect(calls[0]!.headers).toMatchObject({ host: 'internal-lb:8080', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example.com:8443' });
  });

  it('a declared Content-Length over the limit is 413 payload_too_large with Connection: close, never signed nor forwarded', async () => {
    const { forward, calls, sign } = setUp();
    const req = incoming('POST', '/v1/pets', [['Host', 'gw.example'], ['Content-Length', String(MAX_BODY + 1)]]);
    const { res, sent } = outgoing(req);
    await forward(req, res, petsRequest(), key.id);
    expect(calls).toHaveLength(0);
    expect(sign).not.toHaveBeenCalled();
    const response = await sent();
    expect(response.statusLine).toBe('HTTP/1.1 413 Payload Too Large');
    expect(response.headers.connection).toBe('close');
    expect(JSON.parse(response.body)).toEqual({ code: 'payload_too_large', message: `The request body is larger than ${MAX_BODY} bytes.`, status: 413 });
  });

  it('a declared Content-Length at the limit is forwarded', async () => {
    const { forward, calls } = setUp();
    const req = incoming('POST', '/v1/pets', [['Host', 'gw.example'], ['Content-Length', String(MAX_BODY)]]);
    await forward(req, outgoing(req).res, petsRequest(), key.id);
    expect(calls).toHaveLength(1);
  });

  it('a chunked body is counted as it streams: past the limit the upstream request is abandoned and 413 answered once', async () => {
    const { forward, calls, abandon } = setUp();
    const req = incoming('POST', '/v1/pets', [['Host', 'gw.example'], ['Transfer-Encoding', 'chunked']]);
    const { res, sent } = outgoing(req);
    await forward(req, res, petsRequest(), key.id);
    expect(calls).toHaveLength(1);
    req.emit('data', Buffer.alloc(MAX_BODY));
    expect(abandon).not.toHaveBeenCalled();
    req.emit('data', Buffer.alloc(1));
    req.emit('data', Buffer.alloc(100));
    expect(abandon).toHaveBeenCalledTimes(1);
    const response = await sent();
    expect(response.statusLine).toBe('HTTP/1.1 413 Payload Too Large');
    expect(response.headers.connection).toBe('close');
    expect(JSON.parse(response.body)).toMatchObject({ code: 'payload_too_large' });
  });

  it('a chunked body past the limit after the upstream began answering is left to the answer', async () => {
    const { forward, abandon } = setUp();
    const req = incoming('POST', '/v1/pets', [['Host', 'gw.example'], ['Transfer-Encoding', 'chunked']]);
    const { res } = outgoing(req);
    await forward(req, res, petsRequest(), key.id);
    res.writeHead(201, { 'Content-Type': 'application/json' });
    res.write('{');
    req.emit('data', Buffer.alloc(MAX_BODY + 1));
    expect(abandon).not.toHaveBeenCalled();
    expect(res.statusCode).toBe(201);
  });

  it('the upstream\'s answer is timed: upstreamMs on the request, one observation under method, route and status', async () => {
    const { forward, calls, metrics } = setUp();
    const req = incoming('GET', '/v1/pets', [['Host', 'gw.example']]);
    const request = petsRequest();
    await forward(req, outgoing(req).res, request, key.id);
    expect(request.upstreamStartedAt).not.toBeNull();
    calls[0]!.handlers.onResponse!(200);
    expect(request.upstreamMs).toEqual(expect.any(Number));
    expect(request.upstreamMs).toBeGreaterThanOrEqual(0);
    expect(await observations(metrics.upstreamDuration, { method: 'GET', route: '/v1/pets', status_code: '200' })).toBe(1);
  });

  it.each([
    ['refused', { code: 'upstream_unavailable', reason: 'refused', message: 'The inventory service is unreachable.' }, 'HTTP/1.1 502 Bad Gateway', 502],
    ['timeout', { code: 'upstream_timeout', reason: 'timeout', message: 'The inventory service did not answer in time.' }, 'HTTP/1.1 504 Gateway Timeout', 504],
  ] as const)('a failed upstream (%s) is answered with the Error body, counted and logged', async (_reason, failure, statusLine, status) => {
    const { forward, calls, metrics, lines } = setUp();
    const req = incoming('GET', '/v1/pets', [['Host', 'gw.example']]);
    const { res, sent } = outgoing(req);
    await forward(req, res, petsRequest(), key.id);
    calls[0]!.handlers.onFailure(failure);
    const response = await sent();
    expect(response.statusLine).toBe(statusLine);
    expect(JSON.parse(response.body)).toEqual({ code: failure.code, message: failure.message, status });
    expect(await counted(metrics.upstreamErrors, { reason: failure.reason })).toBe(1);
    expect(lines()).toEqual([expect.objectContaining({ level: 40, msg: 'upstream failure', requestId: 'req-fwd', reason: failure.reason })]);
  });
});
