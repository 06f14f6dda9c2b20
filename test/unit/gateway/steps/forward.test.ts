import type { ServerResponse } from 'node:http';
import { ManualClock } from '../../../../src/shared/clock';
import {
  UpstreamTokenSigner,
  UpstreamTokenVerifier,
  type UpstreamTokenSettings,
} from '../../../../src/shared/http/upstream-token';
import type { ForwardHandlers, Forwarder, UpstreamRequest } from '../../../../src/gateway/upstream/forward-contract';
import { cutOffReason } from '../../../../src/gateway/cut-off';
import type { GatewayRequest } from '../../../../src/gateway/request-context';
import { Refusal } from '../../../../src/gateway/refusals';
import { ANSWERED, type StepOutcome } from '../../../../src/gateway/step-outcome';
import { matchRoute } from '../../../../src/gateway/operations/routes';
import { createForwardStep } from '../../../../src/gateway/steps/forward';
import { NOW, counted, gatewayRequest, incoming, keyRecord, observations, stepEnvironment } from './step-kit';

const SIGNING: UpstreamTokenSettings = {
  secret: 'unit-test-signing-secret-0123456789',
  issuer: 'animal-store-gateway',
  audience: 'animal-store-inventory',
  tokenTtlSeconds: 60,
};
const MAX_BODY = 1024;
const PRESENTED = 'asg_test_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z';
const key = keyRecord({ plan: 'pro' });

/** What the forwarder was handed, and what it answers through. */
interface Forwarded {
  upstream: UpstreamRequest;
  /** The client's headers and target when forwarding began, to show they were left as they came. */
  clientHeaders: Record<string, unknown>;
  clientUrl: string | undefined;
  handlers: ForwardHandlers;
  res: ServerResponse;
}

function fakeForwarder() {
  const calls: Forwarded[] = [];
  const waiting: Array<(call: Forwarded) => void> = [];
  const abandon = jest.fn();
  const forwarder: Forwarder = {
    forward(upstream, res, handlers) {
      const call = {
        upstream,
        clientHeaders: { ...upstream.client.headers },
        clientUrl: upstream.client.url,
        handlers,
        res,
      };
      calls.push(call);
      waiting.shift()?.(call);
      return abandon;
    },
    stats: () => ({ activeRequests: 0, openConnections: 0 }),
    close: () => {},
  };
  /** The next request handed to the forwarder (the step signs first, so it arrives a few ticks later). */
  const nextCall = () => new Promise<Forwarded>((resolve) => waiting.push(resolve));
  return { forwarder, calls, abandon, nextCall };
}

function setUp(publicBaseUrl: string | null = null) {
  const env = stepEnvironment();
  const clock = new ManualClock(NOW);
  const signer = new UpstreamTokenSigner(SIGNING, clock);
  const sign = jest.spyOn(signer, 'sign');
  const { forwarder, calls, abandon, nextCall } = fakeForwarder();
  const forward = createForwardStep({
    forwarder,
    signer,
    metrics: env.metrics,
    logger: env.logger,
    maxBodyBytes: MAX_BODY,
    publicBaseUrl,
  });
  const verifier = new UpstreamTokenVerifier(SIGNING, clock);
  /** Starts forwarding `request`; resolves once the forwarder has it, with the step's outcome still to come. */
  const started = async (request: GatewayRequest) => {
    const call = nextCall();
    // The step answers at once (a plain outcome) or later (a promise): await either the same way.
    const outcome: Promise<StepOutcome> = Promise.resolve(forward(request));
    return { outcome, call: await call };
  };
  return { ...env, forward, started, calls, abandon, sign, verifier };
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

/** A request of `key` to GET /v1/pets?limit=2, as the steps before forward leave it. */
const petsRequest = (method: string, url: string, headers: Array<[string, string]>) =>
  gatewayRequest(incoming(method, url, headers), {
    requestId: 'req-fwd',
    path: '/v1/pets',
    originForm: '/v1/pets?limit=2',
    route: matchRoute('/v1/pets'),
    key,
    keyId: key.id,
    plan: key.plan,
  });

const TOO_LARGE = new Refusal('payload_too_large', `The request body is larger than ${MAX_BODY} bytes.`);

describe('forward step', () => {
  it('hands the forwarder an upstream request: origin form, the gateway headers (token added, credentials, hop-by-hop and internal headers gone), the client left as it came', async () => {
    const { started, verifier } = setUp();
    const request = petsRequest('POST', 'http://gw.example:8080/v1/pets?limit=2', CLIENT_HEADERS);
    const { outcome, call } = await started(request);

    const { upstream } = call;
    expect(upstream).toMatchObject({
      method: 'POST',
      path: '/v1/pets?limit=2',
      client: request.req,
      receivedAt: request.startedAt,
    });
    const headers = upstream.headers;
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
    // Node's own request is read, never rewritten.
    expect(call.clientUrl).toBe('http://gw.example:8080/v1/pets?limit=2');
    expect(call.clientHeaders).toMatchObject({
      authorization: `Bearer ${PRESENTED}`,
      cookie: 'session=abc',
      'x-gateway-token': 'forged-token',
    });
    expect(request.req.headers).toBe(upstream.client.headers);
    expect(request.req.headers.authorization).toBe(`Bearer ${PRESENTED}`);

    call.handlers.onResponse!(201);
    expect(await outcome).toBe(ANSWERED);
  });

  it("with server.publicBaseUrl the inventory is told its scheme and host, not the client's Host", async () => {
    const { started } = setUp('https://api.example.com:8443');
    const { call } = await started(petsRequest('GET', '/v1/pets', [['Host', 'internal-lb:8080']]));
    expect(call.upstream.headers).toMatchObject({
      host: 'internal-lb:8080',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'api.example.com:8443',
    });
  });

  it('a declared Content-Length over the limit is refused 413 payload_too_large with Connection: close, never signed nor forwarded', async () => {
    const { forward, calls, sign } = setUp();
    const request = petsRequest('POST', '/v1/pets', [
      ['Host', 'gw.example'],
      ['Content-Length', String(MAX_BODY + 1)],
    ]);
    expect(await forward(request)).toEqual(TOO_LARGE);
    expect(calls).toHaveLength(0);
    expect(sign).not.toHaveBeenCalled();
    expect(request.res.getHeader('connection')).toBe('close');
    expect(request.res.headersSent).toBe(false);
  });

  it('over HTTP/2 a body too large ends its stream alone: no Connection header', async () => {
    const { forward } = setUp();
    const request = petsRequest('POST', '/v1/pets', [['Content-Length', String(MAX_BODY + 1)]]);
    request.req.httpVersionMajor = 2;
    expect(await forward(request)).toEqual(TOO_LARGE);
    expect(request.res.getHeader('connection')).toBeUndefined();
  });

  it('a declared Content-Length at the limit is forwarded', async () => {
    const { started, calls } = setUp();
    await started(
      petsRequest('POST', '/v1/pets', [
        ['Host', 'gw.example'],
        ['Content-Length', String(MAX_BODY)],
      ]),
    );
    expect(calls).toHaveLength(1);
  });

  it('a chunked body is counted as it streams: past the limit the upstream request is abandoned and 413 returned once', async () => {
    const { started, abandon } = setUp();
    const request = petsRequest('POST', '/v1/pets', [
      ['Host', 'gw.example'],
      ['Transfer-Encoding', 'chunked'],
    ]);
    const { outcome, call } = await started(request);
    request.req.emit('data', Buffer.alloc(MAX_BODY));
    expect(abandon).not.toHaveBeenCalled();
    request.req.emit('data', Buffer.alloc(1));
    request.req.emit('data', Buffer.alloc(100));
    expect(abandon).toHaveBeenCalledTimes(1);
    expect(await outcome).toEqual(TOO_LARGE);
    expect(request.res.getHeader('connection')).toBe('close');
    // The forwarder's late word (the abandoned request failing) changes nothing.
    call.handlers.onFailure({ code: 'upstream_unavailable', reason: 'reset', message: 'reset' });
    expect(request.res.headersSent).toBe(false);
  });

  it('a chunked body past the limit after the upstream began answering is left to the answer', async () => {
    const { started, abandon } = setUp();
    const request = petsRequest('POST', '/v1/pets', [
      ['Host', 'gw.example'],
      ['Transfer-Encoding', 'chunked'],
    ]);
    const { outcome, call } = await started(request);
    call.handlers.onResponse!(201);
    request.res.writeHead(201, { 'Content-Type': 'application/json' });
    request.res.write('{');
    request.req.emit('data', Buffer.alloc(MAX_BODY + 1));
    expect(abandon).not.toHaveBeenCalled();
    expect(await outcome).toBe(ANSWERED);
    expect(request.res.statusCode).toBe(201);
  });

  it("the upstream's answer is timed: upstreamMs on the request, one observation under method, route and status", async () => {
    const { started, metrics } = setUp();
    const request = petsRequest('GET', '/v1/pets', [['Host', 'gw.example']]);
    const { call } = await started(request);
    expect(request.upstreamStartedAt).not.toBeNull();
    call.handlers.onResponse!(200);
    expect(request.upstreamMs).toEqual(expect.any(Number));
    expect(request.upstreamMs).toBeGreaterThanOrEqual(0);
    expect(await observations(metrics.upstreamDuration, { method: 'GET', route: '/v1/pets', status_code: '200' })).toBe(
      1,
    );
  });

  it.each([
    [
      'refused',
      { code: 'upstream_unavailable', reason: 'refused', message: 'The inventory service is unreachable.' },
      new Refusal('upstream_unavailable', 'The inventory service is unreachable.'),
    ],
    [
      'timeout',
      { code: 'upstream_timeout', reason: 'timeout', message: 'The inventory service did not answer in time.' },
      new Refusal('upstream_timeout', 'The inventory service did not answer in time.'),
    ],
    [
      'overloaded',
      {
        code: 'upstream_unavailable',
        reason: 'overloaded',
        message: 'busy',
        status: 503,
        headers: { 'Retry-After': '1' },
      },
      new Refusal('upstream_unavailable', 'busy', { 'Retry-After': '1' }, 503),
    ],
  ] as const)(
    'a failed upstream (%s) is returned as the refusal for the handler to answer, counted and logged',
    async (_reason, failure, refusal) => {
      const { started, metrics, lines } = setUp();
      const request = petsRequest('GET', '/v1/pets', [['Host', 'gw.example']]);
      const { outcome, call } = await started(request);
      call.handlers.onFailure(failure);
      expect(await outcome).toEqual(refusal);
      expect(request.res.headersSent).toBe(false);
      expect(await counted(metrics.upstreamErrors, { reason: failure.reason })).toBe(1);
      expect(lines()).toEqual([
        expect.objectContaining({ level: 40, msg: 'upstream failure', requestId: 'req-fwd', reason: failure.reason }),
      ]);
    },
  );

  it("a failure after the answer began cuts the response off, and the request's line is told why", async () => {
    const { started, metrics } = setUp();
    const request = petsRequest('GET', '/v1/pets', [['Host', 'gw.example']]);
    const { outcome, call } = await started(request);
    call.handlers.onResponse!(200);
    request.res.writeHead(200, { 'Content-Length': '100' });
    request.res.write('partial');
    expect(await outcome).toBe(ANSWERED);
    call.handlers.onFailure({
      code: 'upstream_unavailable',
      reason: 'reset',
      message: 'The inventory service closed the connection.',
    });
    expect(cutOffReason(request.res)).toBe('upstream reset');
    expect(request.res.destroyed).toBe(true);
    expect(await counted(metrics.upstreamErrors, { reason: 'reset' })).toBe(1);
  });
});
