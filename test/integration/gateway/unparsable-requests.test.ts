import { hashApiKey } from '../../../src/keys/key-format';
import type { RawResponse } from '../reliability/raw-http';
import { startTestProduct, type ProductHarness } from './gateway-kit';
import { logEntries, openConnection, scrape, total } from './listener-kit';
import { createKey } from '../../support/keys';

/**
 * Requests that node's HTTP parser refuses never reach the request chain, so the chain's own
 * metrics and request log never see them. src/shared/http/unparsable-request.ts answers them in their
 * place; these tests hold it to what an operator needs: each refusal counted in
 * gateway_http_requests_total{method="unparsed"} (public listener only) and logged once with the
 * client's address and the answer's request id, and no secret the request carried in any log line.
 */

const REFUSED = 'request refused by the HTTP parser';

/** Where the refusals come from: a loopback address of their own, so the logged one is provably the client's. */
const CLIENT_ADDRESS = '127.0.0.23';

/** Counter series of one refusal on the public listener, by the status it was answered with. */
const unparsed = (status: number) => ({
  method: 'unparsed',
  route: 'unmatched',
  status_code: String(status),
  plan: 'anonymous',
});

/** Sends `bytes` on a fresh connection from CLIENT_ADDRESS; the answer, and that the server closed afterwards. */
async function sendRefused(baseUrl: string, bytes: string): Promise<RawResponse> {
  const connection = await openConnection(baseUrl, CLIENT_ADDRESS);
  connection.write(bytes);
  const res = await connection.response(5000);
  await connection.closed(5000);
  return res;
}

/** The answer a parser refusal gets: the Error body, an X-Request-Id, Connection: close. Returns the request id. */
function expectRefusal(res: RawResponse, status: number, code: string): string {
  expect({ status: res.status, body: JSON.parse(res.body.toString('utf8')) as unknown }).toEqual({
    status,
    body: { code, message: expect.any(String), status },
  });
  expect(res.headers['content-type']?.[0]).toMatch(/^application\/json/);
  expect(res.headers['connection']).toEqual(['close']);
  expect(res.headers['x-request-id']).toEqual([expect.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/)]);
  return res.headers['x-request-id']![0]!;
}

describe('requests the HTTP parser refuses are counted and logged (src/shared/http/unparsable-request.ts)', () => {
  let product: ProductHarness;
  let key: string;

  beforeAll(async () => {
    product = await startTestProduct({ redis: false, overrides: { server: { maxHeaderBytes: 16384 } } });
    ({ key } = await createKey(product, { plan: 'free' }));
  });

  afterAll(async () => {
    await product?.close();
  });

  it('on the public listener: an oversized header section, a duplicate Content-Length and an obs-fold each add exactly one to their series and write one line with the client address', async () => {
    const before = await scrape(product, 'gateway_http_requests_total');
    const linesBefore = product.logs.lines.length;

    // Each carries a valid key, as a real client's refused request would: it must not reach a log line.
    const auth = `Authorization: Bearer ${key}\r\n`;
    const oversized = await sendRefused(
      product.gatewayUrl,
      `GET /v1/pets HTTP/1.1\r\nHost: gateway\r\n${auth}X-Pad: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    const duplicateLength = await sendRefused(
      product.gatewayUrl,
      `POST /v1/pets HTTP/1.1\r\nHost: gateway\r\n${auth}Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`,
    );
    const obsFold = await sendRefused(
      product.gatewayUrl,
      `GET /v1/pets HTTP/1.1\r\nHost: gateway\r\n${auth}X-Folded: one\r\n two\r\n\r\n`,
    );

    const ids = [
      expectRefusal(oversized, 431, 'headers_too_large'),
      expectRefusal(duplicateLength, 400, 'malformed_request'),
      expectRefusal(obsFold, 400, 'malformed_request'),
    ];
    expect(new Set(ids).size).toBe(3);

    const after = await scrape(product, 'gateway_http_requests_total');
    expect(total(after, unparsed(431)) - total(before, unparsed(431))).toBe(1);
    expect(total(after, unparsed(400)) - total(before, unparsed(400))).toBe(2);
    // Counted once each and nowhere else: no other series of the counter moved.
    expect(total(after) - total(before)).toBe(3);

    const refusals = logEntries(product)
      .slice(linesBefore)
      .filter((entry) => entry.msg === REFUSED);
    expect(refusals).toEqual([
      expect.objectContaining({
        requestId: ids[0],
        status: 431,
        reason: 'HPE_HEADER_OVERFLOW',
        clientAddress: CLIENT_ADDRESS,
      }),
      expect.objectContaining({
        requestId: ids[1],
        status: 400,
        reason: 'HPE_UNEXPECTED_CONTENT_LENGTH',
        clientAddress: CLIENT_ADDRESS,
      }),
      // llhttp names an obs-fold HPE_INVALID_HEADER_TOKEN on Node 24; the name is llhttp's to change.
      expect.objectContaining({
        requestId: ids[2],
        status: 400,
        reason: expect.stringMatching(/^HPE_[A-Z_]+$/),
        clientAddress: CLIENT_ADDRESS,
      }),
    ]);
    for (const entry of refusals) expect(entry.component).toBeUndefined();

    const text = product.logs.text();
    expect(text).not.toContain(key);
    expect(text).not.toContain(key.slice(-20));
    expect(text).not.toContain(hashApiKey(key));
  });

  it('on the admin listener: answered and logged the same way with component "admin", the admin token nowhere in the logs, and not counted as gateway traffic', async () => {
    const before = await scrape(product, 'gateway_http_requests_total');
    const linesBefore = product.logs.lines.length;

    const res = await sendRefused(
      product.adminUrl,
      `GET /admin/keys HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer ${product.adminToken}\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    const requestId = expectRefusal(res, 431, 'headers_too_large');

    const after = await scrape(product, 'gateway_http_requests_total');
    expect(total(after)).toBe(total(before));
    const refusals = logEntries(product)
      .slice(linesBefore)
      .filter((entry) => entry.msg === REFUSED);
    expect(refusals).toEqual([
      expect.objectContaining({
        component: 'admin',
        requestId,
        status: 431,
        reason: 'HPE_HEADER_OVERFLOW',
        clientAddress: CLIENT_ADDRESS,
      }),
    ]);
    expect(product.logs.text()).not.toContain(product.adminToken);
  });
});
