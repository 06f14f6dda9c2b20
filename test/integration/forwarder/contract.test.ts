import {
  FORWARDERS,
  LARGE_BODY,
  ONE_MIB,
  jsonOf,
  send,
  sendAndLeaveOpen,
  sha256,
  startContractProxy,
  startContractUpstream,
  startRawUpstream,
  type ContractProxy,
  type ContractUpstream,
  type ReceivedRequest,
} from './forwarder-kit';
import { freePort } from '../../support/redis-server';
import { eventually } from '../../support/eventually';

/**
 * One contract, both forwarders: what reaches the upstream, what reaches the client, and how every
 * kind of upstream failure is named. Each test builds its own proxy, so pool state never leaks
 * from one to the next.
 */
describe.each(FORWARDERS)('forwarder contract: %s', (kind, create) => {
  let upstream: ContractUpstream;
  let proxy: ContractProxy | null = null;

  beforeAll(async () => {
    upstream = await startContractUpstream();
  });
  afterAll(async () => {
    await upstream.close();
  });
  afterEach(async () => {
    await proxy?.close();
    proxy = null;
  });

  async function proxyTo(target: string, options?: { timeoutMs?: number }): Promise<ContractProxy> {
    proxy = await startContractProxy(create, target, options);
    return proxy;
  }

  function lastReceived(): ReceivedRequest {
    return upstream.received[upstream.received.length - 1]!;
  }

  describe('what the upstream receives', () => {
    it('a GET arrives with the prepared headers exactly, the host of the upstream, and no body', async () => {
      const { url } = await proxyTo(upstream.url);
      const res = await send(`${url}/echo?q=1&r=two`, {
        headers: {
          'x-request-id': 'req-1',
          'x-forwarded-for': '203.0.113.7',
          accept: 'application/json',
          'x-multi': ['one', 'two'],
        },
      });
      expect(res.status).toBe(200);
      expect(lastReceived()).toEqual({
        method: 'GET',
        url: '/echo?q=1&r=two',
        headers: {
          host: upstream.host,
          connection: 'keep-alive',
          'x-request-id': 'req-1',
          'x-forwarded-for': '203.0.113.7',
          accept: 'application/json',
          'x-multi': 'one, two',
        },
        body: Buffer.alloc(0),
      });
    });

    it('a POST with Content-Length arrives with the same length and the same bytes', async () => {
      const { url } = await proxyTo(upstream.url);
      const body = Buffer.from(JSON.stringify({ name: 'Rex', categoryId: 1 }));
      const res = await send(`${url}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      expect(res.status).toBe(200);
      expect(jsonOf(res)).toEqual({ bytes: body.length, sha256: sha256(body) });
      expect(lastReceived()).toEqual({
        method: 'POST',
        url: '/echo',
        headers: {
          host: upstream.host,
          connection: 'keep-alive',
          'content-type': 'application/json',
          'content-length': String(body.length),
        },
        body,
      });
    });

    // httpxy (under http-proxy-middleware 4) closes the upstream connection after a chunked request,
    // so a body framed by chunks can never leave a reused connection out of step (request smuggling).
    const afterChunkedBody = kind === 'http-proxy' ? 'close' : 'keep-alive';

    it(`a chunked POST is streamed on with chunked encoding and arrives intact (upstream connection: ${afterChunkedBody})`, async () => {
      const { url } = await proxyTo(upstream.url);
      const chunks = [Buffer.from('{"name":'), Buffer.from('"Streamed",'), Buffer.from('"categoryId":2}')];
      const res = await send(`${url}/echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: chunks,
      });
      const whole = Buffer.concat(chunks);
      expect(jsonOf(res)).toEqual({ bytes: whole.length, sha256: sha256(whole) });
      expect(lastReceived().headers).toEqual({
        host: upstream.host,
        connection: afterChunkedBody,
        'content-type': 'application/json',
        'transfer-encoding': 'chunked',
      });
      expect(lastReceived().body).toEqual(whole);
    });

    it('a 1 MiB request body streams up intact', async () => {
      const { url } = await proxyTo(upstream.url);
      const res = await send(`${url}/echo`, {
        method: 'PUT',
        headers: { 'content-type': 'application/octet-stream' },
        body: LARGE_BODY,
      });
      expect(jsonOf(res)).toEqual({ bytes: ONE_MIB, sha256: sha256(LARGE_BODY) });
    });
  });

  describe('what the client receives', () => {
    it("the upstream's status, end-to-end headers and body, and onResponse with the status once", async () => {
      const { url, statuses } = await proxyTo(upstream.url);
      const res = await send(`${url}/echo`);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/json');
      expect(res.headers['x-upstream']).toBe('echo');
      expect(res.headers['set-cookie']).toEqual(['a=1; Path=/', 'b=2; Path=/']);
      expect(jsonOf(res)).toEqual({ bytes: 0, sha256: sha256(Buffer.alloc(0)) });

      const created = await send(`${url}/status/201`, { method: 'POST', body: Buffer.from('{}') });
      expect({ status: created.status, body: jsonOf(created) }).toEqual({ status: 201, body: { status: 201 } });
      expect(statuses).toEqual([200, 201]);
    });

    it('an error status from the upstream is passed on as it is, not as a failure', async () => {
      const { url, failures } = await proxyTo(upstream.url);
      const res = await send(`${url}/status/503`);
      expect({ status: res.status, body: jsonOf(res) }).toEqual({ status: 503, body: { status: 503 } });
      expect(failures).toEqual([]);
    });

    it('a HEAD gets the headers and no body', async () => {
      const { url } = await proxyTo(upstream.url);
      const res = await send(`${url}/echo`, { method: 'HEAD' });
      expect({ status: res.status, type: res.headers['content-type'], bytes: res.body.length }).toEqual({
        status: 200,
        type: 'application/json',
        bytes: 0,
      });
    });

    it('a 1 MiB streamed response arrives intact', async () => {
      const { url } = await proxyTo(upstream.url);
      const res = await send(`${url}/large`);
      expect({ status: res.status, complete: res.complete, bytes: res.body.length }).toEqual({
        status: 200,
        complete: true,
        bytes: ONE_MIB,
      });
      expect(sha256(res.body)).toBe(sha256(LARGE_BODY));
    });

    it('hop-by-hop response headers stay on the upstream connection; end-to-end ones come through', async () => {
      const raw = await startRawUpstream((socket) =>
        socket.write(
          'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nKeep-Alive: timeout=3\r\n' +
            'Proxy-Authenticate: Basic realm="x"\r\nProxy-Extra: 1\r\nTrailer: X-Checksum\r\nUpgrade: h2c\r\nX-End-To-End: kept\r\n\r\n[]',
        ),
      );
      try {
        const { url } = await proxyTo(raw.url);
        const res = await send(`${url}/anything`);
        expect({ status: res.status, body: res.body.toString() }).toEqual({ status: 200, body: '[]' });
        expect(res.headers['x-end-to-end']).toBe('kept');
        expect(res.headers['content-type']).toBe('application/json');
        for (const name of ['keep-alive', 'proxy-authenticate', 'proxy-extra', 'trailer', 'upgrade']) {
          expect({ name, value: res.headers[name] }).toEqual({ name, value: undefined });
        }
      } finally {
        await raw.close();
      }
    });
  });

  describe('failures, named as the contract names them', () => {
    it('a refused connection is 502 upstream_unavailable, reason refused', async () => {
      const { url, failures } = await proxyTo(`http://127.0.0.1:${await freePort()}`);
      const res = await send(`${url}/v1/pets`);
      expect({ status: res.status, body: jsonOf(res) }).toEqual({
        status: 502,
        body: { code: 'upstream_unavailable', message: expect.any(String), status: 502 },
      });
      expect(failures.map((f) => f.reason)).toEqual(['refused']);
    });

    it('an upstream that never answers is 504 upstream_timeout, reason timeout, and its request is closed', async () => {
      const { url, failures, forwarder } = await proxyTo(upstream.url, { timeoutMs: 300 });
      const res = await send(`${url}/silent`);
      expect({ status: res.status, body: jsonOf(res) }).toEqual({
        status: 504,
        body: { code: 'upstream_timeout', message: expect.any(String), status: 504 },
      });
      expect(failures.map((f) => [f.code, f.reason])).toEqual([['upstream_timeout', 'timeout']]);
      await eventually(() => upstream.closedEarly.includes('/silent') && forwarder.stats().activeRequests === 0);
    });

    it('an upstream that closes the connection without answering is 502, reason reset', async () => {
      const raw = await startRawUpstream((socket) => socket.end());
      try {
        const { url, failures } = await proxyTo(raw.url);
        const res = await send(`${url}/anything`);
        expect({ status: res.status, code: (jsonOf(res) as { code: string }).code }).toEqual({
          status: 502,
          code: 'upstream_unavailable',
        });
        expect(failures.map((f) => f.reason)).toEqual(['reset']);
      } finally {
        await raw.close();
      }
    });

    it('invalid HTTP from the upstream is 502 upstream_unavailable, reason invalid_response', async () => {
      const raw = await startRawUpstream((socket) => socket.end('this is not HTTP at all\r\n\r\n'));
      try {
        const { url, failures } = await proxyTo(raw.url);
        const res = await send(`${url}/anything`);
        expect({ status: res.status, body: jsonOf(res) }).toEqual({
          status: 502,
          body: { code: 'upstream_unavailable', message: expect.any(String), status: 502 },
        });
        expect(failures.map((f) => [f.code, f.reason])).toEqual([['upstream_unavailable', 'invalid_response']]);
      } finally {
        await raw.close();
      }
    });

    it('an upstream that resets mid-response cuts the client off, and the proxy keeps serving', async () => {
      const { url, forwarder } = await proxyTo(upstream.url);
      const cut = await send(`${url}/reset`);
      expect({ status: cut.status, complete: cut.complete }).toEqual({ status: 200, complete: false });
      expect(cut.body.length).toBeLessThan(ONE_MIB);
      await eventually(() => forwarder.stats().activeRequests === 0);

      const next = await send(`${url}/echo`);
      expect(next.status).toBe(200);
    });
  });

  describe('letting go', () => {
    it('a client that hangs up early closes the upstream request and leaves nothing in flight', async () => {
      const { url, forwarder, failures } = await proxyTo(upstream.url);
      const silentBefore = upstream.received.filter((r) => r.url === '/silent').length;
      const client = sendAndLeaveOpen(`${url}/silent`);
      await eventually(() => upstream.received.filter((r) => r.url === '/silent').length > silentBefore);
      expect(forwarder.stats().activeRequests).toBe(1);

      const closedBefore = upstream.closedEarly.length;
      client.hangUp();
      await eventually(() => upstream.closedEarly.length > closedBefore);
      await eventually(() => forwarder.stats().activeRequests === 0);
      expect(failures).toEqual([]);

      const next = await send(`${url}/echo`);
      expect(next.status).toBe(200);
    });

    it('abandoning a request mid-body closes it upstream, reports no failure, and the proxy can still answer the client', async () => {
      const { url, forwarder, failures } = await proxyTo(upstream.url);
      const chunks = Array.from({ length: 32 }, () => Buffer.alloc(1024, 'x'));
      const res = await send(`${url}/echo`, { method: 'POST', headers: { 'x-abandon-after': '4096' }, body: chunks });
      expect({ status: res.status, code: (jsonOf(res) as { code: string }).code }).toEqual({
        status: 413,
        code: 'payload_too_large',
      });
      await eventually(() => forwarder.stats().activeRequests === 0);
      expect(failures).toEqual([]);
      expect(upstream.received.filter((r) => r.method === 'POST' && r.body.length === 32 * 1024)).toEqual([]);
    });

    it('keeps connections to the upstream open between requests and releases every request', async () => {
      const { url, forwarder } = await proxyTo(upstream.url);
      for (let i = 0; i < 5; i++) expect((await send(`${url}/echo`)).status).toBe(200);
      await eventually(() => forwarder.stats().activeRequests === 0);
      expect(forwarder.stats().openConnections).toBe(1);
    });
  });
});

describe('both forwarders deliver the same request to the upstream', () => {
  it('the same headers and body, byte for byte', async () => {
    const upstream = await startContractUpstream();
    try {
      const seen: ReceivedRequest[] = [];
      for (const [, create] of FORWARDERS) {
        const proxy = await startContractProxy(create, upstream.url);
        try {
          await send(`${proxy.url}/echo/same`, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'x-request-id': 'same',
              authorization: 'Bearer stays-if-the-pipeline-kept-it',
            },
            body: Buffer.from('{"name":"Same"}'),
          });
          seen.push(upstream.received[upstream.received.length - 1]!);
        } finally {
          await proxy.close();
        }
      }
      expect(seen).toHaveLength(2);
      expect(seen[1]).toEqual(seen[0]);
    } finally {
      await upstream.close();
    }
  });
});
