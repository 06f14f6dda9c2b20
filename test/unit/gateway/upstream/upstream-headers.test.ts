import type { IncomingHttpHeaders } from 'node:http';
import {
  isHopByHopResponseHeader,
  upstreamHeaders,
  type UpstreamIdentity,
} from '../../../../src/gateway/upstream/upstream-headers';

const identity: UpstreamIdentity = {
  token: 'signed.jwt.token',
  requestId: 'req-up',
  clientAddress: '203.0.113.7',
  forwardedProto: 'http',
  forwardedHost: null,
};

describe('upstreamHeaders', () => {
  it('drops credentials, hop-by-hop headers, client-sent forwarding headers and x-gateway-*; keeps the rest', () => {
    const incoming: IncomingHttpHeaders = {
      host: 'gw.example',
      authorization: 'Bearer asg_test_secret',
      'proxy-authorization': 'Basic abc',
      cookie: 'a=1',
      connection: 'keep-alive',
      'keep-alive': 'timeout=5',
      'proxy-connection': 'keep-alive',
      te: 'trailers',
      trailer: 'x-checksum',
      upgrade: 'h2c',
      expect: '100-continue',
      forwarded: 'for=198.51.100.1',
      'x-forwarded-for': '198.51.100.1',
      'x-forwarded-host': 'forged.example',
      'x-forwarded-proto': 'https',
      'x-real-ip': '198.51.100.1',
      'x-gateway-token': 'forged',
      'x-gateway-anything': 'forged',
      accept: 'application/json',
      'content-type': 'application/json',
      'x-client-trace': 'abc',
    };
    expect(upstreamHeaders(incoming, identity)).toEqual({
      host: 'gw.example',
      accept: 'application/json',
      'content-type': 'application/json',
      'x-client-trace': 'abc',
      'x-gateway-token': 'signed.jwt.token',
      'x-request-id': 'req-up',
      'x-forwarded-for': '203.0.113.7',
      'x-forwarded-proto': 'http',
      'x-forwarded-host': 'gw.example',
    });
  });

  it('drops the headers Connection lists, whatever their case and spacing (RFC 9110 §7.6.1)', () => {
    const out = upstreamHeaders(
      {
        host: 'gw.example',
        connection: 'Keep-Alive ,  X-Hop-One,x-hop-two',
        'x-hop-one': '1',
        'x-hop-two': '2',
        'x-stays': '3',
      },
      identity,
    );
    expect(out['x-hop-one']).toBeUndefined();
    expect(out['x-hop-two']).toBeUndefined();
    expect(out['x-stays']).toBe('3');
  });

  it('an HTTP/2 request: pseudo-headers and te never go upstream, :authority becomes Host', () => {
    const out = upstreamHeaders(
      {
        ':method': 'GET',
        ':path': '/v1/pets',
        ':authority': 'gw.example:8443',
        ':scheme': 'https',
        te: 'trailers',
        accept: 'application/json',
      },
      identity,
    );
    expect(Object.keys(out).filter((name) => name.startsWith(':') || name === 'te')).toEqual([]);
    expect(out).toMatchObject({
      host: 'gw.example:8443',
      'x-forwarded-host': 'gw.example:8443',
      accept: 'application/json',
    });
  });

  it("the client's own x-request-id is replaced by the gateway's", () => {
    expect(upstreamHeaders({ host: 'gw.example', 'x-request-id': 'client' }, identity)['x-request-id']).toBe('req-up');
  });

  it("x-forwarded-host is the public host when configured, else the client's Host, else localhost", () => {
    expect(
      upstreamHeaders(
        { host: 'internal:8080' },
        { ...identity, forwardedHost: 'api.example.com', forwardedProto: 'https' },
      ),
    ).toMatchObject({
      host: 'internal:8080',
      'x-forwarded-host': 'api.example.com',
      'x-forwarded-proto': 'https',
    });
    expect(upstreamHeaders({ host: 'gw.example:8080' }, identity)['x-forwarded-host']).toBe('gw.example:8080');
    expect(upstreamHeaders({}, identity)['x-forwarded-host']).toBe('localhost');
  });

  it('leaves the incoming headers as they were', () => {
    const incoming: IncomingHttpHeaders = { host: 'gw.example', authorization: 'Bearer x', 'set-cookie': ['a', 'b'] };
    const copy = structuredClone(incoming);
    upstreamHeaders(incoming, identity);
    expect(incoming).toEqual(copy);
  });
});

describe('isHopByHopResponseHeader', () => {
  it.each([
    'connection',
    'keep-alive',
    'transfer-encoding',
    'upgrade',
    'te',
    'trailer',
    'proxy-authenticate',
    'proxy-anything',
  ])('%s stays on the upstream connection', (name) => {
    expect(isHopByHopResponseHeader(name)).toBe(true);
  });

  it.each(['content-type', 'content-length', 'set-cookie', 'x-request-id', 'link', 'trailers-welcome'])(
    '%s goes on to the client',
    (name) => {
      expect(isHopByHopResponseHeader(name)).toBe(false);
    },
  );
});
