import type { IncomingMessage } from 'node:http';
import { gzipSync } from 'node:zlib';
import { connectRedis, type RedisClient } from '../../../src/shared/redis/redis';
import { systemClock } from '../../../src/shared/clock';
import { KeyService, RedisKeyStore, type KeyStore } from '../../../src/keys';
import { startTestProduct, type ProductHarness } from '../../support/product-harness';
import {
  buildRequest,
  chunkedBody,
  contractProblems,
  describeOutcome,
  inputErrorLogLines,
  outcomeOf,
  sendRaw,
  sendRawPipeline,
  type HeaderList,
  type RawExchange,
  type RawRequestSpec,
  type RawResponse,
  type RawSendOptions,
} from './raw-http';

/**
 * Bad input, one row each: what it is, and what the gateway (or node:http in front of it) answers.
 * The whole product runs (real Redis, real inventory); every request goes over a raw loopback
 * socket, byte for byte, so nothing is normalised away before the gateway sees it.
 *
 * Every row also meets the contract's general rules (contractProblems): never a 5xx, never a hang,
 * X-Request-Id on every answer our code gives, the Error body with a code of CONTRACT §3 on every
 * 4xx, nothing internal in a body. Where node:http refuses the request itself (its parser, its
 * header size limit), the row says so: that answer is node's, bodiless and without X-Request-Id.
 */

interface Ctx {
  /** `Bearer <valid enterprise key with limits far above this suite's traffic>`. */
  auth: string;
  key: string;
  /** A key of the production environment (`asg_live_…`), stored in this product's own key store. */
  otherEnvironmentKey: string;
  revokedAuth: string;
  /** A key whose windows this suite uses up. */
  exhaustedAuth: string;
  /** A cursor the inventory issued. */
  cursor: string;
  /** Headers of requests the embedded inventory received during the current row. */
  inventorySaw: IncomingMessage['headers'][];
}

type Expectation =
  /** Our code answers with this status (and, for a 4xx, this Error code). */
  | { status: number; code?: string }
  /**
   * node:http's parser refuses the request; the gateway's clientError listener answers in node's
   * place with the Error body (400 malformed_request, 431 headers_too_large) and closes.
   */
  | { parser: 400 | 431 }
  /** The server closes the connection without answering. */
  | { closed: true }
  /** The server keeps waiting (for bytes the client promised): no answer within `ms`. */
  | { waits: number };

interface Row {
  input: string;
  request: (c: Ctx) => RawRequestSpec | Buffer;
  expect: Expectation;
  send?: RawSendOptions;
  /** Row-specific checks beyond the expectation. */
  also?: (res: RawResponse, c: Ctx) => void;
}

const LIMIT = 16 * 1024;
const PARSER_REFUSALS = { 400: '400 malformed_request', 431: '431 headers_too_large' } as const;
const JSON_TYPE: [string, string] = ['Content-Type', 'application/json'];
const VALID_PET = '{"name":"Rex","categoryId":1}';

const get =
  (target: string | Buffer, headers: HeaderList = []) =>
  (c: Ctx): RawRequestSpec => ({
    method: 'GET',
    target,
    headers: [['Authorization', c.auth], ...headers],
  });
const withMethod =
  (method: string, target: string) =>
  (c: Ctx): RawRequestSpec => ({ method, target, headers: [['Authorization', c.auth]] });
const withAuth =
  (authorization: (c: Ctx) => string | Buffer, extra: HeaderList = []) =>
  (c: Ctx): RawRequestSpec => ({
    method: 'GET',
    target: '/v1/pets',
    headers: [['Authorization', authorization(c)], ...extra],
  });
/** POST /v1/pets with the body as given and its true length, unless headers say otherwise. */
const post =
  (body: string | Buffer, headers: HeaderList = [JSON_TYPE], target = '/v1/pets') =>
  (c: Ctx): RawRequestSpec => {
    const framed = headers.some(([name]) => /^(content-length|transfer-encoding)$/i.test(name));
    return {
      method: 'POST',
      target,
      headers: [
        ['Authorization', c.auth],
        ...headers,
        ...(framed ? [] : ([['Content-Length', String(Buffer.byteLength(body))]] as const)),
      ],
      body,
    };
  };
const rawBytes =
  (text: (c: Ctx) => string) =>
  (c: Ctx): Buffer =>
    Buffer.from(text(c), 'latin1');
const pet = (fields: Record<string, unknown>) => JSON.stringify(fields);
const nested = (depth: number, open: string, close: string, inner = '1') =>
  open.repeat(depth) + inner + close.repeat(depth);

const methods: Row[] = [
  { input: 'lower-case method `get`', request: withMethod('get', '/v1/pets'), expect: { parser: 400 } },
  { input: 'mixed-case method `Get`', request: withMethod('Get', '/v1/pets'), expect: { parser: 400 } },
  { input: 'unknown method token `FOO`', request: withMethod('FOO', '/v1/pets'), expect: { parser: 400 } },
  { input: 'unknown method token `BREW`', request: withMethod('BREW', '/v1/pets/1'), expect: { parser: 400 } },
  {
    input: 'method with a hyphen node does not know `GET-X`',
    request: withMethod('GET-X', '/v1/pets'),
    expect: { parser: 400 },
  },
  {
    input: 'WebDAV method PROPFIND on /v1/pets',
    request: withMethod('PROPFIND', '/v1/pets'),
    expect: { status: 405, code: 'method_not_allowed' },
  },
  {
    input: 'QUERY on /v1/pets',
    request: withMethod('QUERY', '/v1/pets'),
    expect: { status: 405, code: 'method_not_allowed' },
  },
  {
    input: 'TRACE on /v1/pets',
    request: withMethod('TRACE', '/v1/pets'),
    expect: { status: 405, code: 'method_not_allowed' },
  },
  {
    input: 'OPTIONS on /v1/pets',
    request: withMethod('OPTIONS', '/v1/pets'),
    expect: { status: 405, code: 'method_not_allowed' },
  },
  {
    input: 'DELETE on /v1/pets/1',
    request: withMethod('DELETE', '/v1/pets/1'),
    expect: { status: 405, code: 'method_not_allowed' },
    also: (res) => expect(res.headers['allow']).toEqual(['GET, HEAD']),
  },
  {
    input: 'PUT on an unknown path',
    request: withMethod('PUT', '/v1/owners'),
    expect: { status: 404, code: 'not_found' },
  },
  {
    input: 'M-SEARCH on /v1/pets/1',
    request: withMethod('M-SEARCH', '/v1/pets/1'),
    expect: { status: 405, code: 'method_not_allowed' },
  },
  {
    input: 'CONNECT (no tunnel is offered)',
    request: withMethod('CONNECT', '127.0.0.1:6379'),
    expect: { closed: true },
  },
  { input: 'HEAD /v1/pets', request: withMethod('HEAD', '/v1/pets'), expect: { status: 200 } },
  {
    input: 'HEAD on an unknown path (Error headers, no body)',
    request: withMethod('HEAD', '/v1/owners'),
    expect: { status: 404 },
  },
  {
    input: 'HTTP/2 connection preface',
    request: rawBytes(() => 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'),
    expect: { parser: 400 },
  },
  {
    input: 'TLS ClientHello bytes on the plain port',
    request: () => Buffer.from('1603010200010001fc0303', 'hex'),
    expect: { parser: 400 },
  },
  {
    input: 'HTTP/1.0 request',
    request: (c) => ({ ...get('/v1/pets')(c), version: 'HTTP/1.0' }),
    expect: { status: 200 },
  },
  {
    input: 'version HTTP/1.2',
    request: (c) => ({ ...get('/v1/pets')(c), version: 'HTTP/1.2' }),
    expect: { parser: 400 },
  },
  {
    input: 'version in lower case `http/1.1`',
    request: (c) => ({ ...get('/v1/pets')(c), version: 'http/1.1' }),
    expect: { parser: 400 },
  },
  {
    input: 'request line without a version',
    request: rawBytes(() => 'GET /v1/pets\r\n\r\n'),
    expect: { status: 401, code: 'missing_api_key' },
  },
];

const paths: Row[] = [
  {
    input: 'raw `..` climbing out of /v1 and back',
    request: get('/v1/../v1/pets'),
    expect: { status: 404, code: 'not_found' },
  },
  {
    input: "raw `..` towards the inventory's /healthz",
    request: get('/v1/pets/../../healthz'),
    expect: { status: 404, code: 'not_found' },
  },
  { input: 'raw `..` as the pet id', request: get('/v1/pets/..'), expect: { status: 400, code: 'invalid_parameter' } },
  {
    input: '`%2e%2e` as the pet id',
    request: get('/v1/pets/%2e%2e'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: '`%2e%2e%2f` climbing, encoded, towards /healthz',
    request: get('/v1/pets/%2e%2e%2f%2e%2e%2fhealthz'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: '`%2e%2e` segment inside /v1',
    request: get('/v1/%2e%2e/v1/pets'),
    expect: { status: 404, code: 'not_found' },
  },
  {
    input: 'backslashes `..\\..\\healthz` as the pet id',
    request: get('/v1/pets/..\\..\\healthz'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  { input: 'leading `//`', request: get('//v1/pets'), expect: { status: 404, code: 'not_found' } },
  { input: '`//` inside the path', request: get('/v1//pets'), expect: { status: 404, code: 'not_found' } },
  { input: 'trailing `//`', request: get('/v1/pets//'), expect: { status: 404, code: 'not_found' } },
  { input: '`%00` as the pet id', request: get('/v1/pets/%00'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: '`1%00` as the pet id', request: get('/v1/pets/1%00'), expect: { status: 400, code: 'invalid_parameter' } },
  {
    input: 'non-UTF-8 escape `%ff` as the pet id',
    request: get('/v1/pets/%ff'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: 'overlong UTF-8 `%c0%af` as the pet id',
    request: get('/v1/pets/%c0%af'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: 'broken escape `%zz` as the pet id',
    request: get('/v1/pets/%zz'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  { input: 'lone `%` in the path', request: get('/v1/pets/%'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: 'raw byte 0xff in the path', request: get(Buffer.from('/v1/pets/\xff', 'latin1')), expect: { parser: 400 } },
  {
    input: 'raw control byte 0x01 in the path',
    request: get(Buffer.from('/v1/pets/\x01', 'latin1')),
    expect: { parser: 400 },
  },
  { input: 'raw DEL in the path', request: get(Buffer.from('/v1/pets/\x7f', 'latin1')), expect: { parser: 400 } },
  {
    input: 'pet id of 12,000 characters',
    request: get('/v1/pets/' + '7'.repeat(12_000)),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: 'path of 20,000 characters (over the header limit)',
    request: get('/v1/' + 'a'.repeat(20_000)),
    expect: { parser: 431 },
  },
  { input: 'pet id 0', request: get('/v1/pets/0'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: 'pet id -1', request: get('/v1/pets/-1'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: 'pet id 1.0', request: get('/v1/pets/1.0'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: 'pet id +1', request: get('/v1/pets/+1'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: 'pet id 0x1', request: get('/v1/pets/0x1'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: 'pet id 1e3', request: get('/v1/pets/1e3'), expect: { status: 400, code: 'invalid_parameter' } },
  {
    input: 'pet id 2^53',
    request: get('/v1/pets/9007199254740992'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: 'pet id of 30 digits',
    request: get('/v1/pets/' + '9'.repeat(30)),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: 'pet id 2^53−1 (valid, unknown)',
    request: get('/v1/pets/9007199254740991'),
    expect: { status: 404, code: 'not_found' },
  },
  { input: 'upper-case `/V1/pets`', request: get('/V1/pets'), expect: { status: 404, code: 'not_found' } },
  { input: 'upper-case `/v1/PETS`', request: get('/v1/PETS'), expect: { status: 404, code: 'not_found' } },
  { input: 'encoded slash `/v1/pets%2f1`', request: get('/v1/pets%2f1'), expect: { status: 404, code: 'not_found' } },
  {
    input: 'matrix parameter `/v1/pets;x=1`',
    request: get('/v1/pets;x=1'),
    expect: { status: 404, code: 'not_found' },
  },
  { input: 'asterisk-form `*`', request: get('*'), expect: { status: 404, code: 'not_found' } },
  {
    input: 'absolute-form `http://127.0.0.1/v1/pets`',
    request: get('http://127.0.0.1/v1/pets'),
    expect: { status: 200 },
  },
  {
    input: 'absolute-form with `..` towards /healthz',
    request: get('http://127.0.0.1/v1/pets/../../healthz'),
    expect: { status: 404, code: 'not_found' },
  },
  { input: 'a fragment `#x` in the target', request: get('/v1/pets#x'), expect: { status: 200 } },
];

const queries: Row[] = [
  { input: '`limit[]=1`', request: get('/v1/pets?limit[]=1'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: '`limit[0]=1`', request: get('/v1/pets?limit[0]=1'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: '`limit=1e2`', request: get('/v1/pets?limit=1e2'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: '`limit=-1`', request: get('/v1/pets?limit=-1'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: '`limit=0`', request: get('/v1/pets?limit=0'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: '`limit=101`', request: get('/v1/pets?limit=101'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: '`limit=1.5`', request: get('/v1/pets?limit=1.5'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: '`limit=+1`', request: get('/v1/pets?limit=+1'), expect: { status: 400, code: 'invalid_parameter' } },
  {
    input: '`limit=%201` (leading space)',
    request: get('/v1/pets?limit=%201'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: '`limit` of 20 digits',
    request: get('/v1/pets?limit=' + '9'.repeat(20)),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  { input: '`limit=` (empty)', request: get('/v1/pets?limit='), expect: { status: 400, code: 'invalid_parameter' } },
  {
    input: '`limit` without a value',
    request: get('/v1/pets?limit'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  { input: '`limit=%ff`', request: get('/v1/pets?limit=%ff'), expect: { status: 400, code: 'invalid_parameter' } },
  {
    input: 'repeated `limit=1&limit=2`',
    request: get('/v1/pets?limit=1&limit=2'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: 'repeated `limit=1&limit=1`',
    request: get('/v1/pets?limit=1&limit=1'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: 'encoded name `%6cimit=0`',
    request: get('/v1/pets?%6cimit=0'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  { input: '`limit=%31` (an encoded 1)', request: get('/v1/pets?limit=%31'), expect: { status: 200 } },
  {
    input: '`cursor=garbage`',
    request: get('/v1/pets?cursor=garbage'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  { input: '`cursor=%00`', request: get('/v1/pets?cursor=%00'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: '`cursor=` (empty)', request: get('/v1/pets?cursor='), expect: { status: 400, code: 'invalid_parameter' } },
  {
    input: 'cursor of 8,000 characters',
    request: get('/v1/pets?cursor=' + 'A'.repeat(8000)),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: 'a valid cursor given twice',
    request: (c) => get(`/v1/pets?cursor=${c.cursor}&cursor=${c.cursor}`)(c),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: 'a valid cursor with one character changed',
    request: (c) => get(`/v1/pets?cursor=${c.cursor.slice(0, -1)}${c.cursor.endsWith('A') ? 'B' : 'A'}`)(c),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: 'repeated `status=available&status=sold`',
    request: get('/v1/pets?status=available&status=sold'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: '`status=AVAILABLE`',
    request: get('/v1/pets?status=AVAILABLE'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: '`status[]=sold`',
    request: get('/v1/pets?status[]=sold'),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  { input: '`status=%ff`', request: get('/v1/pets?status=%ff'), expect: { status: 400, code: 'invalid_parameter' } },
  { input: 'a lone `%` as the query', request: get('/v1/pets?%'), expect: { status: 200 } },
  { input: 'only separators `?&&&`', request: get('/v1/pets?&&&'), expect: { status: 200 } },
  { input: '`__proto__=1&constructor=x`', request: get('/v1/pets?__proto__=1&constructor=x'), expect: { status: 200 } },
  {
    input: '2,000 unknown parameters',
    request: get('/v1/pets?' + Array.from({ length: 2000 }, (_, i) => `p${i}=1`).join('&')),
    expect: { status: 200 },
  },
];

const headers: Row[] = [
  {
    input: 'no Authorization',
    request: () => ({ method: 'GET', target: '/v1/pets' }),
    expect: { status: 401, code: 'missing_api_key' },
  },
  { input: 'empty Authorization', request: withAuth(() => ''), expect: { status: 401, code: 'missing_api_key' } },
  { input: '`Bearer` with two spaces', request: withAuth((c) => `Bearer  ${c.key}`), expect: { status: 200 } },
  { input: 'lower-case scheme `bearer`', request: withAuth((c) => `bearer ${c.key}`), expect: { status: 200 } },
  {
    input: 'leading and trailing spaces around `Bearer <key>`',
    request: withAuth((c) => `   Bearer ${c.key}   `),
    expect: { status: 200 },
  },
  {
    input: '`Bearer<TAB><key>`',
    request: withAuth((c) => `Bearer\t${c.key}`),
    expect: { status: 401, code: 'invalid_api_key' },
  },
  {
    input: '`Bearer<key>` without a space',
    request: withAuth((c) => `Bearer${c.key}`),
    expect: { status: 401, code: 'invalid_api_key' },
  },
  { input: '`Bearer` alone', request: withAuth(() => 'Bearer'), expect: { status: 401, code: 'invalid_api_key' } },
  {
    input: 'the key without a scheme',
    request: withAuth((c) => c.key),
    expect: { status: 401, code: 'invalid_api_key' },
  },
  {
    input: 'the key twice in one value',
    request: withAuth((c) => `Bearer ${c.key} ${c.key}`),
    expect: { status: 401, code: 'invalid_api_key' },
  },
  {
    input: 'Basic credentials',
    request: withAuth((c) => `Basic ${Buffer.from(`${c.key}:`).toString('base64')}`),
    expect: { status: 401, code: 'invalid_api_key' },
  },
  {
    input: 'a valid key of another environment (asg_live_, in this key store)',
    request: withAuth((c) => `Bearer ${c.otherEnvironmentKey}`),
    expect: { status: 401, code: 'invalid_api_key' },
  },
  {
    input: "this key's secret under the staging prefix asg_test_",
    request: withAuth((c) => `Bearer ${c.key.replace(/^asg_dev_/, 'asg_test_')}`),
    expect: { status: 401, code: 'invalid_api_key' },
  },
  {
    input: 'the key truncated by one character',
    request: withAuth((c) => `Bearer ${c.key.slice(0, -1)}`),
    expect: { status: 401, code: 'invalid_api_key' },
  },
  { input: 'a revoked key', request: withAuth((c) => c.revokedAuth), expect: { status: 401, code: 'revoked_api_key' } },
  {
    input: 'a key whose limit is used up',
    request: withAuth((c) => c.exhaustedAuth),
    expect: { status: 429, code: 'rate_limited' },
  },
  {
    input: 'Authorization of 12,000 bytes',
    request: withAuth(() => 'Bearer ' + 'a'.repeat(12_000)),
    expect: { status: 401, code: 'invalid_api_key' },
  },
  {
    input: 'repeated Authorization, valid then invalid (ambiguous: refused, though node keeps the first)',
    request: (c) => ({
      method: 'GET',
      target: '/v1/pets',
      headers: [
        ['Authorization', c.auth],
        ['Authorization', 'Bearer asg_dev_nope'],
      ],
    }),
    expect: { status: 401, code: 'invalid_api_key' },
    also: (_res, c) => expect(c.inventorySaw).toEqual([]),
  },
  {
    input: 'repeated Authorization, invalid then valid',
    request: (c) => ({
      method: 'GET',
      target: '/v1/pets',
      headers: [
        ['Authorization', 'Bearer asg_dev_nope'],
        ['Authorization', c.auth],
      ],
    }),
    expect: { status: 401, code: 'invalid_api_key' },
  },
  {
    input: 'repeated Authorization, the same valid key twice (refused: exactly one is allowed)',
    request: (c) => ({
      method: 'GET',
      target: '/v1/pets',
      headers: [
        ['Authorization', c.auth],
        ['Authorization', c.auth],
      ],
    }),
    expect: { status: 401, code: 'invalid_api_key' },
    also: (_res, c) => expect(c.inventorySaw).toEqual([]),
  },
  {
    input: 'control byte 0x01 in a header value',
    request: get('/v1/pets', [['X-Note', 'a\x01b']]),
    expect: { parser: 400 },
  },
  { input: 'DEL in the Authorization value', request: withAuth((c) => `Bearer \x7f${c.key}`), expect: { parser: 400 } },
  { input: 'NUL in a header value', request: get('/v1/pets', [['X-Note', 'a\x00b']]), expect: { parser: 400 } },
  {
    input: 'non-UTF-8 bytes in a header value',
    request: get('/v1/pets', [['X-Note', Buffer.from([0xff, 0xfe, 0xc3])]]),
    expect: { status: 200 },
  },
  {
    input: 'non-UTF-8 bytes in the Authorization value',
    request: withAuth(() => Buffer.from([0x42, 0x65, 0x61, 0x72, 0x65, 0x72, 0x20, 0xff, 0xfe])),
    expect: { status: 401, code: 'invalid_api_key' },
  },
  {
    input: 'a header of 20,000 bytes',
    request: get('/v1/pets', [['X-Pad', 'a'.repeat(20_000)]]),
    expect: { parser: 431 },
  },
  {
    input: '3,000 small headers',
    request: get(
      '/v1/pets',
      Array.from({ length: 3000 }, (_, i) => [`X-H${i}`, 'v'] as const),
    ),
    expect: { parser: 431 },
  },
  {
    input: 'a header of 12,000 bytes (under the limit)',
    request: get('/v1/pets', [['X-Pad', 'a'.repeat(12_000)]]),
    expect: { status: 200 },
  },
  {
    input: 'space before the colon of a header name',
    request: rawBytes((c) => `GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization : ${c.auth}\r\n\r\n`),
    expect: { parser: 400 },
  },
  {
    input: 'obsolete line folding',
    request: rawBytes((c) => `GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer\r\n ${c.key}\r\n\r\n`),
    expect: { parser: 400 },
  },
  {
    input: 'bare LF line endings',
    request: rawBytes((c) => `GET /v1/pets HTTP/1.1\nHost: x\nAuthorization: ${c.auth}\n\n`),
    expect: { parser: 400 },
  },
  {
    input: 'a header line without a colon',
    request: rawBytes((c) => `GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: ${c.auth}\r\nno-colon\r\n\r\n`),
    expect: { parser: 400 },
  },
  { input: 'an empty Host', request: get('/v1/pets', [['Host', '']]), expect: { status: 200 } },
  { input: 'Host with a space and a path', request: get('/v1/pets', [['Host', 'a b/c']]), expect: { status: 200 } },
  {
    input: 'X-Request-Id of 200 characters (replaced)',
    request: get('/v1/pets', [['X-Request-Id', 'r'.repeat(200)]]),
    expect: { status: 200 },
    also: (res) => expect(res.headers['x-request-id']?.[0]).not.toBe('r'.repeat(200)),
  },
  {
    input: 'X-Request-Id with spaces and quotes (replaced)',
    request: get('/v1/pets', [['X-Request-Id', 'a b"<script>']]),
    expect: { status: 200 },
    also: (res) => expect(res.headers['x-request-id']?.[0]).not.toContain(' '),
  },
  {
    input: 'repeated X-Request-Id (replaced)',
    request: get('/v1/pets', [
      ['X-Request-Id', 'first'],
      ['X-Request-Id', 'second'],
    ]),
    expect: { status: 200 },
    also: (res) => expect(res.headers['x-request-id']?.[0]).not.toMatch(/first|second/),
  },
  {
    input: 'a sane X-Request-Id (kept)',
    request: get('/v1/pets', [['X-Request-Id', 'client-id-42']]),
    expect: { status: 200 },
    also: (res) => expect(res.headers['x-request-id']).toEqual(['client-id-42']),
  },
  {
    input: 'garbage X-Forwarded-For',
    request: get('/v1/pets', [['X-Forwarded-For', 'garbage, ::1, 999.1.1.1, ']]),
    expect: { status: 200 },
  },
  {
    input: 'a forged X-Gateway-Token (stripped)',
    request: get('/v1/pets', [['X-Gateway-Token', 'forged']]),
    expect: { status: 200 },
    also: (_res, c) => expect(c.inventorySaw.map((h) => h['x-gateway-token'])).not.toContain('forged'),
  },
  {
    input: 'Connection listing Authorization and Host',
    request: get('/v1/pets', [['Connection', 'close, authorization, host']]),
    expect: { status: 200 },
  },
  {
    input: 'Upgrade: websocket without a handler',
    request: get('/v1/pets', [
      ['Connection', 'Upgrade'],
      ['Upgrade', 'websocket'],
    ]),
    expect: { status: 200 },
  },
  {
    input: '`Expect: 100-continue`',
    request: post(VALID_PET, [JSON_TYPE, ['Expect', '100-continue']]),
    expect: { status: 201 },
  },
  {
    input: '`Expect: tea` (an expectation we ignore, as RFC 9110 allows: served)',
    request: post(VALID_PET, [JSON_TYPE, ['Expect', 'tea']]),
    expect: { status: 201 },
  },
  {
    input: 'Content-Length and Transfer-Encoding together',
    request: post(chunkedBody(['{}']), [JSON_TYPE, ['Content-Length', '2'], ['Transfer-Encoding', 'chunked']]),
    expect: { parser: 400 },
  },
  {
    input: 'two different Content-Length headers',
    request: post('{}', [JSON_TYPE, ['Content-Length', '2'], ['Content-Length', '3']]),
    expect: { parser: 400 },
  },
  {
    input: 'Content-Length `abc`',
    request: post('{}', [JSON_TYPE, ['Content-Length', 'abc']]),
    expect: { parser: 400 },
  },
  { input: 'Content-Length `-1`', request: post('{}', [JSON_TYPE, ['Content-Length', '-1']]), expect: { parser: 400 } },
  {
    input: 'Transfer-Encoding `bogus`',
    request: post('{}', [JSON_TYPE, ['Transfer-Encoding', 'bogus']]),
    expect: { parser: 400 },
  },
  {
    input: 'Transfer-Encoding `identity` with a length',
    request: post('{}', [JSON_TYPE, ['Transfer-Encoding', 'identity'], ['Content-Length', '2']]),
    expect: { parser: 400 },
  },
];

const bigPet = (bytes: number) => {
  const head = '{"name":"Rex","categoryId":1';
  return head + ' '.repeat(bytes - head.length - 1) + '}';
};
const gzipBomb = gzipSync(Buffer.from(pet({ name: 'a'.repeat(100_000), categoryId: 1 })));

const bodies: Row[] = [
  { input: 'invalid JSON `{x`', request: post('{x'), expect: { status: 400, code: 'invalid_json' } },
  { input: 'truncated JSON', request: post(VALID_PET.slice(0, -1)), expect: { status: 400, code: 'invalid_json' } },
  {
    input: 'JSON with trailing garbage',
    request: post(VALID_PET + 'x'),
    expect: { status: 400, code: 'invalid_json' },
  },
  {
    input: 'single-quoted JSON',
    request: post("{'name':'Rex','categoryId':1}"),
    expect: { status: 400, code: 'invalid_json' },
  },
  { input: 'whitespace only', request: post('   '), expect: { status: 400, code: 'invalid_json' } },
  {
    input: 'non-UTF-8 bytes in a string',
    request: post(Buffer.from('{"name":"\xe9","categoryId":1}', 'latin1')),
    expect: { status: 400, code: 'invalid_json' },
  },
  {
    input: 'a UTF-8 BOM before a valid pet',
    request: post(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(VALID_PET)])),
    expect: { status: 201 },
  },
  { input: 'empty object', request: post('{}'), expect: { status: 400, code: 'validation_failed' } },
  { input: 'JSON array', request: post('[]'), expect: { status: 400, code: 'validation_failed' } },
  { input: 'JSON null', request: post('null'), expect: { status: 400, code: 'validation_failed' } },
  { input: 'JSON string', request: post('"Rex"'), expect: { status: 400, code: 'validation_failed' } },
  { input: 'JSON number', request: post('1'), expect: { status: 400, code: 'validation_failed' } },
  { input: 'Content-Length 0', request: post(''), expect: { status: 400, code: 'validation_failed' } },
  {
    input: '`name` a number',
    request: post(pet({ name: 1, categoryId: 1 })),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: '`name` an object',
    request: post(pet({ name: { first: 'Rex' }, categoryId: 1 })),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: '`name` of spaces only',
    request: post(pet({ name: '   ', categoryId: 1 })),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: '`name` of 201 characters',
    request: post(pet({ name: 'n'.repeat(201), categoryId: 1 })),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: '`name` of 16,000 characters (a huge string within the body limit)',
    request: post(pet({ name: 'n'.repeat(16_000), categoryId: 1 })),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: '`name` a lone surrogate',
    request: post('{"name":"\\ud800","categoryId":1}'),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: '`categoryId` a string',
    request: post(pet({ name: 'Rex', categoryId: '1' })),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: '`categoryId` 1.5',
    request: post(pet({ name: 'Rex', categoryId: 1.5 })),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: '`categoryId` 0',
    request: post(pet({ name: 'Rex', categoryId: 0 })),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: '`categoryId` 2^53',
    request: post('{"name":"Rex","categoryId":9007199254740992}'),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: '`categoryId` 1e400 (Infinity)',
    request: post('{"name":"Rex","categoryId":1e400}'),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: '`categoryId` null',
    request: post(pet({ name: 'Rex', categoryId: null })),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: '`status` unknown',
    request: post(pet({ name: 'Rex', categoryId: 1, status: 'lost' })),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: 'a client-sent `id`',
    request: post(pet({ id: 1, name: 'Rex', categoryId: 1 })),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: 'an unknown field',
    request: post(pet({ name: 'Rex', categoryId: 1, owner: 'me' })),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: 'a `__proto__` key',
    request: post('{"__proto__":{"admin":true},"name":"Rex","categoryId":1}'),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: 'arrays nested 8,000 deep',
    request: post(nested(8000, '[', ']')),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: 'objects nested 2,500 deep in `name`',
    request: post(`{"name":${nested(2500, '{"a":', '}')},"categoryId":1}`),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: 'Content-Type text/plain',
    request: post(VALID_PET, [['Content-Type', 'text/plain']]),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  { input: 'no Content-Type', request: post(VALID_PET, []), expect: { status: 415, code: 'unsupported_media_type' } },
  {
    input: 'Content-Type application/x-www-form-urlencoded',
    request: post('name=Rex&categoryId=1', [['Content-Type', 'application/x-www-form-urlencoded']]),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    input: 'Content-Type multipart/form-data',
    request: post(VALID_PET, [['Content-Type', 'multipart/form-data; boundary=x']]),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    input: 'Content-Type application/json-patch+json',
    request: post(VALID_PET, [['Content-Type', 'application/json-patch+json']]),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    input: 'charset latin1',
    request: post(VALID_PET, [['Content-Type', 'application/json; charset=latin1']]),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    input: 'charset utf-16',
    request: post(VALID_PET, [['Content-Type', 'application/json; charset=utf-16']]),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  { input: 'a body of exactly 16 KiB', request: post(bigPet(LIMIT)), expect: { status: 201 } },
  {
    input: 'a body of 16 KiB + 1',
    request: post(bigPet(LIMIT + 1)),
    expect: { status: 413, code: 'payload_too_large' },
  },
  {
    input: 'declared length 1 MiB, no body sent (answered at once)',
    request: post('', [JSON_TYPE, ['Content-Length', String(1024 * 1024)]]),
    expect: { status: 413, code: 'payload_too_large' },
    also: (res) => expect(res.headers['connection']).toEqual(['close']),
  },
  {
    input: 'a 40 KB body declared as such',
    request: post(bigPet(40_000)),
    expect: { status: 413, code: 'payload_too_large' },
  },
  {
    input: 'a chunked body of exactly 16 KiB',
    request: post(chunkedBody(['{"name":"Rex","categoryId":1', ' '.repeat(LIMIT - 29), '}']), [
      JSON_TYPE,
      ['Transfer-Encoding', 'chunked'],
    ]),
    expect: { status: 201 },
  },
  {
    input: 'a chunked body beyond the limit (40 chunks of 1,000 bytes)',
    request: post(chunkedBody(Array.from({ length: 40 }, () => ' '.repeat(1000))), [
      JSON_TYPE,
      ['Transfer-Encoding', 'chunked'],
    ]),
    expect: { status: 413, code: 'payload_too_large' },
    also: (res) => expect(res.headers['connection']).toEqual(['close']),
  },
  {
    input: 'a chunked body of 1 MiB in 64 KiB chunks, sent piece by piece',
    request: (c) => post('', [JSON_TYPE, ['Transfer-Encoding', 'chunked']])(c),
    send: { more: Array.from({ length: 16 }, () => chunkedBody([' '.repeat(64 * 1024)]).subarray(0, -5)) },
    expect: { status: 413, code: 'payload_too_large' },
  },
  {
    input: 'a chunk size that is not hex',
    request: post('zz\r\n{}\r\n0\r\n\r\n', [JSON_TYPE, ['Transfer-Encoding', 'chunked']]),
    expect: { parser: 400 },
  },
  {
    input: 'a chunk size of 18 hex digits',
    request: post('ffffffffffffffffff\r\n{}\r\n0\r\n\r\n', [JSON_TYPE, ['Transfer-Encoding', 'chunked']]),
    expect: { parser: 400 },
  },
  {
    input: 'a chunk extension',
    request: post('2;ext=1\r\n{}\r\n0\r\n\r\n', [JSON_TYPE, ['Transfer-Encoding', 'chunked']]),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: 'a chunked trailer',
    request: post('2\r\n{}\r\n0\r\nX-Trailer: 1\r\n\r\n', [JSON_TYPE, ['Transfer-Encoding', 'chunked']]),
    expect: { status: 400, code: 'validation_failed' },
  },
  {
    input: 'a gzip-encoded valid pet',
    request: post(gzipSync(Buffer.from(VALID_PET)), [JSON_TYPE, ['Content-Encoding', 'gzip']]),
    expect: { status: 201 },
  },
  {
    input: 'a gzip bomb (small, inflates past 16 KiB)',
    request: post(gzipBomb, [JSON_TYPE, ['Content-Encoding', 'gzip']]),
    expect: { status: 413, code: 'payload_too_large' },
  },
  {
    input: 'Content-Encoding gzip on bytes that are not gzip',
    request: post(VALID_PET, [JSON_TYPE, ['Content-Encoding', 'gzip']]),
    expect: { status: 400, code: 'invalid_parameter' },
  },
  {
    input: 'an unknown Content-Encoding',
    request: post(VALID_PET, [JSON_TYPE, ['Content-Encoding', 'rot13']]),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    input: 'a body on GET within the limit',
    request: (c) => ({ ...get('/v1/pets', [JSON_TYPE, ['Content-Length', '2']])(c), body: '{}' }),
    expect: { status: 200 },
  },
  {
    input: 'a 20 KB body on GET',
    request: (c) => ({ ...get('/v1/pets', [['Content-Length', '20000']])(c), body: 'x'.repeat(20_000) }),
    expect: { status: 413, code: 'payload_too_large' },
  },
  {
    input: 'a valid pet to /v1/pets/ (trailing slash)',
    request: post(VALID_PET, [JSON_TYPE], '/v1/pets/'),
    expect: { status: 404, code: 'not_found' },
  },
  {
    input: 'POST on /v1/pets/1',
    request: post(VALID_PET, [JSON_TYPE], '/v1/pets/1'),
    expect: { status: 405, code: 'method_not_allowed' },
  },
  {
    input: 'a declared length longer than the body, connection left open (the server waits for the rest)',
    request: post('{"name":', [JSON_TYPE, ['Content-Length', '100']]),
    send: { timeoutMs: 500 },
    expect: { waits: 500 },
  },
  {
    input: 'a declared length longer than the body, then the client half-closes',
    request: post('{"name":', [JSON_TYPE, ['Content-Length', '100']]),
    send: { endAfterWrite: true },
    expect: { parser: 400 },
  },
  {
    input: 'a chunked body cut short, then the client half-closes',
    request: post('50\r\n{"name":', [JSON_TYPE, ['Transfer-Encoding', 'chunked']]),
    send: { endAfterWrite: true },
    expect: { parser: 400 },
  },
  {
    input: 'a complete GET, then the client half-closes at once (node drops the request)',
    request: get('/v1/pets'),
    send: { endAfterWrite: true },
    expect: { closed: true },
  },
];

const CATALOGUE: ReadonlyArray<[string, Row[]]> = [
  ['methods and request lines', methods],
  ['paths', paths],
  ['query strings', queries],
  ['headers and credentials', headers],
  ['bodies of POST /v1/pets', bodies],
];

function expectationText(e: Expectation): string {
  if ('parser' in e) return `${PARSER_REFUSALS[e.parser]}, connection closed`;
  if ('closed' in e) return 'closed without an answer';
  if ('waits' in e) return `no answer within ${e.waits} ms, connection kept open`;
  return e.code ? `${e.status} ${e.code}` : String(e.status);
}

describe('bad input catalogue: what the gateway answers to each', () => {
  let product: ProductHarness;
  let redis: RedisClient;
  let store: KeyStore;
  const c = { inventorySaw: [] } as unknown as Ctx;

  beforeAll(async () => {
    // No anonymous 429 for the keyless rows: the anonymous limit is not what this suite tests.
    product = await startTestProduct({ overrides: { anonymous: { perMinute: 1_000_000 } } });
    const created = await product.keyService.create({
      name: 'bad input',
      plan: 'enterprise',
      limits: { perMinute: 1_000_000, perDay: 10_000_000 },
    });
    c.key = created.key;
    c.auth = `Bearer ${created.key}`;

    const revoked = await product.keyService.create({ name: 'revoked', plan: 'free' });
    await product.keyService.revoke(revoked.record.id);
    c.revokedAuth = `Bearer ${revoked.key}`;

    // One request a day, used up here: still used up when its row runs, whatever minute that is.
    const exhausted = await product.keyService.create({
      name: 'exhausted',
      plan: 'free',
      limits: { perMinute: 1, perDay: 1 },
    });
    c.exhaustedAuth = `Bearer ${exhausted.key}`;
    const first = await sendRaw(product.gatewayUrl, {
      method: 'GET',
      target: '/v1/pets',
      headers: [['Authorization', c.exhaustedAuth]],
    });
    expect(first.response?.status).toBe(200);

    // A production key written to this product's own store: the record exists, the prefix is wrong.
    redis = await connectRedis(product.config.redis);
    store = await RedisKeyStore.open(redis, { namespace: product.config.redis.namespace });
    const production = new KeyService({
      store,
      prefix: 'asg_live_',
      plans: () => product.config.plans,
      clock: systemClock,
    });
    c.otherEnvironmentKey = (
      await production.create({ name: 'production', plan: 'enterprise', limits: { perMinute: 1000, perDay: 1000 } })
    ).key;

    for (let i = 0; i < 3; i++) {
      const made = await sendRaw(product.gatewayUrl, post(VALID_PET)(c));
      expect(made.response?.status).toBe(201);
    }
    const page = await sendRaw(product.gatewayUrl, get('/v1/pets?limit=1')(c));
    c.cursor = /cursor=([A-Za-z0-9_-]+)/.exec(page.response?.headers['link']?.[0] ?? '')![1]!;

    product.inventory!.server.prependListener('request', (req: IncomingMessage) => c.inventorySaw.push(req.headers));
  });

  afterAll(async () => {
    await store?.close();
    redis?.disconnect();
    await product?.close();
  });

  for (const [group, rows] of CATALOGUE) {
    describe(group, () => {
      it.each(rows.map((row) => [`${row.input} → ${expectationText(row.expect)}`, row] as const))(
        '%s',
        async (_name, row) => {
          c.inventorySaw.length = 0;
          const request = row.request(c);
          const exchange: RawExchange = await sendRaw(product.gatewayUrl, request, { timeoutMs: 10_000, ...row.send });
          const e = row.expect;
          const head = !Buffer.isBuffer(request) && request.method === 'HEAD';

          if ('waits' in e) {
            expect({ answer: exchange.response?.status ?? null, timedOut: exchange.timedOut }).toEqual({
              answer: null,
              timedOut: true,
            });
            return;
          }
          expect(
            contractProblems(exchange, {
              head,
              forbidden: [product.dataDir, process.cwd()],
              mayCloseWithoutAnswer: 'closed' in e,
            }),
          ).toEqual([]);
          const outcome = describeOutcome(outcomeOf(exchange));
          if ('closed' in e) {
            expect(outcome).toBe('closed without an answer');
          } else if ('parser' in e) {
            expect(outcome).toBe(PARSER_REFUSALS[e.parser]);
            expect(exchange.response!.headers['connection']).toEqual(['close']);
          } else {
            expect(outcome).toBe(e.code ? `${e.status} ${e.code}` : String(e.status));
          }
          if (row.also) row.also(exchange.response!, c);
        },
      );
    });
  }

  /**
   * A request hidden in the body of another, on one keep-alive connection, followed by a last
   * request (GET /v1/owners, 404) that closes it: the hidden one must never be answered, whether the
   * gateway refuses the outer request before reading its body or forwards it.
   */
  describe('a request smuggled in a body on a keep-alive connection', () => {
    const hidden = (c: Ctx) => `GET /v1/pets/1 HTTP/1.1\r\nHost: x\r\nAuthorization: ${c.auth}\r\n\r\n`;
    const outer = (spec: { method?: string; headers: HeaderList; body: string | Buffer }): Buffer =>
      buildRequest(
        {
          method: spec.method ?? 'POST',
          target: '/v1/pets',
          headers: [['Connection', 'keep-alive'], ...spec.headers],
          body: spec.body,
        },
        'x',
      );
    const closing = (c: Ctx) =>
      buildRequest({ method: 'GET', target: '/v1/owners', headers: [['Authorization', c.auth]] }, 'x');
    const rows: ReadonlyArray<{ input: string; bytes: (c: Ctx) => Buffer; statuses: number[] }> = [
      {
        input: 'without a key (401 before the body is read)',
        bytes: (c) => outer({ headers: [JSON_TYPE, ['Content-Length', String(hidden(c).length)]], body: hidden(c) }),
        statuses: [401, 404],
      },
      {
        input: 'as text/plain (415 from the inventory)',
        bytes: (c) =>
          outer({
            headers: [
              ['Authorization', c.auth],
              ['Content-Type', 'text/plain'],
              ['Content-Length', String(hidden(c).length)],
            ],
            body: hidden(c),
          }),
        statuses: [415, 404],
      },
      {
        input: 'in a PUT (405 before the body is read)',
        bytes: (c) =>
          outer({
            method: 'PUT',
            headers: [
              ['Authorization', c.auth],
              ['Content-Length', String(hidden(c).length)],
            ],
            body: hidden(c),
          }),
        statuses: [405, 404],
      },
      {
        input: 'with Content-Length listed in Connection (dropped before forwarding: 400)',
        bytes: (c) =>
          outer({
            headers: [
              ['Authorization', c.auth],
              JSON_TYPE,
              ['Connection', 'content-length'],
              ['Content-Length', String(hidden(c).length)],
            ],
            body: hidden(c),
          }),
        statuses: [400, 404],
      },
      {
        input: 'in a chunked body with Transfer-Encoding listed in Connection',
        bytes: (c) =>
          outer({
            headers: [
              ['Authorization', c.auth],
              JSON_TYPE,
              ['Connection', 'transfer-encoding'],
              ['Transfer-Encoding', 'chunked'],
            ],
            body: chunkedBody([hidden(c)]),
          }),
        statuses: [400, 404],
      },
      {
        input: 'at the start of a 20 KB declared body (413, then the connection is closed)',
        bytes: (c) =>
          outer({
            headers: [['Authorization', c.auth], JSON_TYPE, ['Content-Length', '20000']],
            body: hidden(c).padEnd(20_000, ' '),
          }),
        statuses: [413],
      },
      {
        input: 'at the start of a chunked body over the limit (413, then the connection is closed)',
        bytes: (c) =>
          outer({
            headers: [['Authorization', c.auth], JSON_TYPE, ['Transfer-Encoding', 'chunked']],
            body: chunkedBody([hidden(c), ...Array.from({ length: 20 }, () => ' '.repeat(1000))]),
          }),
        statuses: [413],
      },
    ];

    it.each(rows.map((row) => [`${row.input} → ${row.statuses.join(', then ')}`, row] as const))(
      '%s',
      async (_name, row) => {
        const { responses, closed } = await sendRawPipeline(
          product.gatewayUrl,
          Buffer.concat([row.bytes(c), closing(c)]),
        );
        expect({ statuses: responses.map((r) => r.status), closed }).toEqual({ statuses: row.statuses, closed: true });
        for (const response of responses) {
          expect(
            contractProblems(
              { response, closed: true, timedOut: false, socketError: null },
              { forbidden: [product.dataDir, process.cwd()] },
            ),
          ).toEqual([]);
        }
      },
    );
  });

  /** Inputs on which the gateway once broke the contract; found by this suite and fixed. */
  describe('inputs that once broke the contract', () => {
    const violations = async (request: RawRequestSpec, label: string): Promise<string[]> => {
      const exchange = await sendRaw(product.gatewayUrl, request);
      return contractProblems(exchange, { forbidden: [product.dataDir, process.cwd()] }).map((p) => `${label}: ${p}`);
    };

    it('inventory header limit: a request whose headers the gateway accepts is not refused by the inventory with a bodiless 431', async () => {
      // The gateway adds its token and forwarding headers (~450 bytes) and the inventory has the same
      // maxHeaderSize, so a request just under the gateway's limit gets the inventory's own 431:
      // no Error body, no content type, a code the contract does not have.
      const problems: string[] = [];
      for (let size = LIMIT - 1200; size <= LIMIT + 200; size += 50) {
        problems.push(
          ...(await violations(get('/v1/pets', [['X-Pad', 'a'.repeat(size)]])(c), `X-Pad of ${size} bytes`)),
        );
        problems.push(...(await violations(get('/v1/pets?pad=' + 'a'.repeat(size))(c), `query of ${size} bytes`)));
      }
      expect(problems).toEqual([]);
    });

    it("header count: up to node's limit of 1,000 header lines a request with a valid key is served (the inventory is not short of the gateway's token or Host); past it, the gateway's 431 headers_too_large", async () => {
      // node drops request headers past its count limit (1,000 when they arrive in several reads, as
      // the forwarders write them), and the gateway's token and, through http-proxy, Host come last:
      // the inventory once answered 401 "x-gateway-token header is missing" (undici) or a bodiless
      // 400. Node 24 also refuses more than 1,000 header lines at the gateway's own parser.
      const outcomes: Record<number, string> = {};
      const problems: string[] = [];
      // Host, Authorization and Connection come on top of these.
      for (const count of [990, 995, 1000, 1500, 1990]) {
        const request = get(
          '/v1/pets',
          Array.from({ length: count }, (_, i) => [`X-H${i}`, 'v'] as const),
        )(c);
        const exchange = await sendRaw(product.gatewayUrl, request);
        problems.push(
          ...contractProblems(exchange, { forbidden: [product.dataDir, process.cwd()] }).map(
            (p) => `${count} headers: ${p}`,
          ),
        );
        outcomes[count] = describeOutcome(outcomeOf(exchange));
      }
      expect(problems).toEqual([]);
      expect(outcomes).toEqual({
        990: '200',
        995: '200',
        1000: '431 headers_too_large',
        1500: '431 headers_too_large',
        1990: '431 headers_too_large',
      });
    });

    it('undici forwarder: an absolute-form target with a scheme other than lower-case http(s) is not a 502', async () => {
      // The gateway routes on the path, then hands undici `req.url` as it came; undici refuses any
      // path that neither starts with `/` nor with `http://`/`https://`, and that becomes a 502.
      const problems: string[] = [];
      for (const target of ['foo://x/v1/pets', 'HTTP://127.0.0.1/v1/pets', 'file:///v1/pets']) {
        problems.push(...(await violations(get(target)(c), `GET ${target}`)));
      }
      problems.push(...(await violations(post(VALID_PET, [JSON_TYPE], 'foo://x/v1/pets')(c), 'POST foo://x/v1/pets')));
      expect(problems).toEqual([]);
    });

    it("Express final handler: a target url.parse cannot read gets the Error body and X-Request-Id, not Express's HTML 404", async () => {
      // Express's router cannot take the path of these targets and skips every middleware, so
      // Express's own final handler answers: an HTML "Cannot GET" page without X-Request-Id.
      const problems: string[] = [];
      for (const target of ['http://[::1/v1/pets', 'http://[::1]x/v1/pets', 'http://[fe80::1%25eth0]/v1/pets']) {
        problems.push(...(await violations(get(target)(c), `GET ${target}`)));
      }
      expect(problems).toEqual([]);
    });
  });

  it('afterwards still serves GET /v1/pets with 200, and nothing was logged at error level', async () => {
    const exchange = await sendRaw(product.gatewayUrl, get('/v1/pets')(c));
    expect(exchange.response?.status).toBe(200);
    expect(Array.isArray(JSON.parse(exchange.response!.body.toString('utf8')))).toBe(true);
    expect(inputErrorLogLines(product.logs.lines)).toEqual([]);
  });
});
