import { encodeCursor } from '../../../src/inventory/pagination-cursor';
import { UPSTREAM_TOKEN_HEADER } from '../../../src/shared/http/upstream-token';
import type { ErrorCode } from '../../../src/shared/errors';
import { rawRequest, startTestInventory, type RawResponse, type TestInventory } from '../../support/inventory-harness';
import { expectError } from '../../support/errors';

/**
 * The bad-input catalogue: every malformed request the inventory must refuse, each with its
 * status and code, and none of them may write a row.
 */

const JSON_TYPE = { 'Content-Type': 'application/json' };
const validPet = JSON.stringify({ name: 'Rex', categoryId: 1 });
const b64 = (s: string) => Buffer.from(s).toString('base64url');
const MAX_BODY = 16 * 1024;

/** A JSON body of exactly `bytes` bytes whose name is far too long (so only the size decides 413). */
function bodyOfSize(bytes: number): string {
  const skeleton = JSON.stringify({ name: '', categoryId: 1 });
  return JSON.stringify({ name: 'x'.repeat(bytes - skeleton.length), categoryId: 1 });
}

interface Case {
  name: string;
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  status: number;
  code: ErrorCode;
  /** A fragment the message must contain (which parameter or field is wrong). */
  mentions?: string;
}

const listCases: Case[] = [
  ...(['1e2', '-1', '0', '101', 'abc', '', '1.5', '+5', '0x10', '%201'] as const).map((limit): Case => ({
    name: `limit=${limit}`,
    method: 'GET',
    path: `/v1/pets?limit=${limit}`,
    status: 400,
    code: 'invalid_parameter',
    mentions: '`limit`',
  })),
  {
    name: 'limit[]=1',
    method: 'GET',
    path: '/v1/pets?limit[]=1',
    status: 400,
    code: 'invalid_parameter',
    mentions: '`limit`',
  },
  {
    name: 'limit%5B%5D=1 (encoded brackets)',
    method: 'GET',
    path: '/v1/pets?limit%5B%5D=1',
    status: 400,
    code: 'invalid_parameter',
    mentions: '`limit`',
  },
  {
    name: 'limit=1&limit=2',
    method: 'GET',
    path: '/v1/pets?limit=1&limit=2',
    status: 400,
    code: 'invalid_parameter',
    mentions: '`limit`',
  },
  {
    name: 'status=lost',
    method: 'GET',
    path: '/v1/pets?status=lost',
    status: 400,
    code: 'invalid_parameter',
    mentions: '`status`',
  },
  {
    name: 'status=AVAILABLE',
    method: 'GET',
    path: '/v1/pets?status=AVAILABLE',
    status: 400,
    code: 'invalid_parameter',
    mentions: '`status`',
  },
  {
    name: 'status= (empty)',
    method: 'GET',
    path: '/v1/pets?status=',
    status: 400,
    code: 'invalid_parameter',
    mentions: '`status`',
  },
  {
    name: 'status[]=sold',
    method: 'GET',
    path: '/v1/pets?status[]=sold',
    status: 400,
    code: 'invalid_parameter',
    mentions: '`status`',
  },
  {
    name: 'status twice',
    method: 'GET',
    path: '/v1/pets?status=sold&status=pending',
    status: 400,
    code: 'invalid_parameter',
    mentions: '`status`',
  },
  {
    name: 'cursor garbage',
    method: 'GET',
    path: '/v1/pets?cursor=not-a-cursor',
    status: 400,
    code: 'invalid_parameter',
    mentions: '`cursor`',
  },
  {
    name: 'cursor with junk appended',
    method: 'GET',
    path: `/v1/pets?cursor=${encodeCursor(3)}x`,
    status: 400,
    code: 'invalid_parameter',
    mentions: '`cursor`',
  },
  {
    name: 'cursor of position 0',
    method: 'GET',
    path: `/v1/pets?cursor=${b64('v1:0')}`,
    status: 400,
    code: 'invalid_parameter',
    mentions: '`cursor`',
  },
  {
    name: 'cursor of another format',
    method: 'GET',
    path: `/v1/pets?cursor=${b64('{"after":3}')}`,
    status: 400,
    code: 'invalid_parameter',
    mentions: '`cursor`',
  },
  {
    name: 'cursor twice',
    method: 'GET',
    path: `/v1/pets?cursor=${encodeCursor(1)}&cursor=${encodeCursor(2)}`,
    status: 400,
    code: 'invalid_parameter',
    mentions: '`cursor`',
  },
];

const getCases: Case[] = [
  ...['abc', '0', '-1', '1.5', '1e3', '0x1', '9007199254740992', '99999999999999999999999'].map((id): Case => ({
    name: `petId ${id}`,
    method: 'GET',
    path: `/v1/pets/${id}`,
    status: 400,
    code: 'invalid_parameter',
    mentions: '`petId`',
  })),
  { name: 'petId not decodable (%ZZ)', method: 'GET', path: '/v1/pets/%ZZ', status: 400, code: 'invalid_parameter' },
  { name: 'unknown petId', method: 'GET', path: '/v1/pets/999999', status: 404, code: 'not_found', mentions: '999999' },
  { name: 'largest petId, unknown', method: 'GET', path: '/v1/pets/9007199254740991', status: 404, code: 'not_found' },
];

const createCases: Case[] = [
  {
    name: 'no body, no content type',
    method: 'POST',
    path: '/v1/pets',
    status: 400,
    code: 'validation_failed',
    mentions: 'required',
  },
  {
    name: 'empty JSON body',
    method: 'POST',
    path: '/v1/pets',
    headers: { ...JSON_TYPE, 'Content-Length': '0' },
    status: 400,
    code: 'validation_failed',
    mentions: 'required',
  },
  {
    name: 'empty chunked JSON body',
    method: 'POST',
    path: '/v1/pets',
    headers: { ...JSON_TYPE, 'Transfer-Encoding': 'chunked' },
    body: '',
    status: 400,
    code: 'validation_failed',
    mentions: 'required',
  },
  {
    name: 'text/plain body',
    method: 'POST',
    path: '/v1/pets',
    headers: { 'Content-Type': 'text/plain' },
    body: validPet,
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'form body',
    method: 'POST',
    path: '/v1/pets',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: 'name=Rex&categoryId=1',
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'body without content type',
    method: 'POST',
    path: '/v1/pets',
    body: validPet,
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'JSON in latin1',
    method: 'POST',
    path: '/v1/pets',
    headers: { 'Content-Type': 'application/json; charset=latin1' },
    body: validPet,
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'JSON with an unknown content encoding',
    method: 'POST',
    path: '/v1/pets',
    headers: { ...JSON_TYPE, 'Content-Encoding': 'compress' },
    body: validPet,
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'malformed JSON',
    method: 'POST',
    path: '/v1/pets',
    headers: JSON_TYPE,
    body: '{"name": "Rex",',
    status: 400,
    code: 'invalid_json',
  },
  {
    name: 'whitespace only',
    method: 'POST',
    path: '/v1/pets',
    headers: JSON_TYPE,
    body: '   ',
    status: 400,
    code: 'invalid_json',
  },
  {
    name: 'not UTF-8',
    method: 'POST',
    path: '/v1/pets',
    headers: JSON_TYPE,
    body: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
    status: 400,
    code: 'invalid_json',
  },
  {
    name: 'body of 16 KiB + 1',
    method: 'POST',
    path: '/v1/pets',
    headers: JSON_TYPE,
    body: bodyOfSize(MAX_BODY + 1),
    status: 413,
    code: 'payload_too_large',
  },
  {
    name: 'body of 1 MiB',
    method: 'POST',
    path: '/v1/pets',
    headers: JSON_TYPE,
    body: bodyOfSize(1024 * 1024),
    status: 413,
    code: 'payload_too_large',
  },
  // Exactly at the limit the body is read, and refused for its content instead.
  {
    name: 'body of exactly 16 KiB',
    method: 'POST',
    path: '/v1/pets',
    headers: JSON_TYPE,
    body: bodyOfSize(MAX_BODY),
    status: 400,
    code: 'validation_failed',
    mentions: 'name',
  },
  ...(['[]', 'null', '42', '"Rex"', 'true'] as const).map((body): Case => ({
    name: `body ${body}`,
    method: 'POST',
    path: '/v1/pets',
    headers: JSON_TYPE,
    body,
    status: 400,
    code: 'validation_failed',
    mentions: 'JSON object',
  })),
  ...(
    [
      ['{}', 'name'],
      ['{"categoryId":1}', 'name'],
      ['{"name":"Rex"}', 'categoryId'],
      ['{"name":"","categoryId":1}', 'name'],
      ['{"name":"   ","categoryId":1}', 'name'],
      [JSON.stringify({ name: 'x'.repeat(201), categoryId: 1 }), 'name'],
      ['{"name":7,"categoryId":1}', 'name'],
      ['{"name":null,"categoryId":1}', 'name'],
      ['{"name":"Rex","categoryId":0}', 'categoryId'],
      ['{"name":"Rex","categoryId":-1}', 'categoryId'],
      ['{"name":"Rex","categoryId":1.5}', 'categoryId'],
      ['{"name":"Rex","categoryId":"1"}', 'categoryId'],
      ['{"name":"Rex","categoryId":9007199254740992}', 'categoryId'],
      ['{"name":"Rex","categoryId":1e400}', 'categoryId'],
      ['{"name":"Rex","categoryId":1,"status":"lost"}', 'status'],
      ['{"name":"Rex","categoryId":1,"status":null}', 'status'],
      ['{"name":"Rex","categoryId":1,"id":5}', 'id'],
      ['{"name":"Rex","categoryId":1,"color":"brown"}', 'color'],
      ['{"name":"Rex","categoryId":1,"__proto__":{"admin":true}}', '__proto__'],
    ] as const
  ).map(([body, field]): Case => ({
    name: `body ${body.slice(0, 60)}`,
    method: 'POST',
    path: '/v1/pets',
    headers: JSON_TYPE,
    body,
    status: 400,
    code: 'validation_failed',
    mentions: field,
  })),
];

/** The kit's expectError, and what the inventory adds: a request id, and nothing of a stack or an HTML page. */
function expectErrorResponse(res: RawResponse, status: number, code: ErrorCode): void {
  expectError(res, status, code);
  expect(res.headers['x-request-id']).toEqual(expect.any(String));
  expect(res.text).not.toMatch(/<html|\n\s+at /i);
}

describe('inventory: bad input is refused with the contract status and code, and writes nothing', () => {
  let inventory: TestInventory;

  beforeAll(async () => {
    inventory = await startTestInventory();
    for (let i = 0; i < 3; i += 1) await inventory.createPet({ name: `Seed ${i}`, categoryId: 1 });
  });
  afterAll(async () => {
    await inventory.close();
  });

  it.each([...listCases, ...getCases, ...createCases].map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const before = inventory.countPets();
    const res = await rawRequest(inventory.url, {
      method: c.method,
      path: c.path,
      headers: { ...c.headers, [UPSTREAM_TOKEN_HEADER]: await inventory.token() },
      body: c.body,
    });
    expectErrorResponse(res, c.status, c.code);
    if (c.mentions) expect((res.body as { message: string }).message).toContain(c.mentions);
    expect(inventory.countPets()).toBe(before);
  });

  it('the catalogue covers every client-error status and code of the inventory', () => {
    const seen = new Set([...listCases, ...getCases, ...createCases].map((c) => `${c.status} ${c.code}`));
    expect([...seen].sort()).toEqual(
      [
        '400 invalid_json',
        '400 invalid_parameter',
        '400 validation_failed',
        '404 not_found',
        '413 payload_too_large',
        '415 unsupported_media_type',
      ].sort(),
    );
  });

  it('a valid request next to the catalogue still succeeds (the harness is not refusing everything)', async () => {
    const res = await rawRequest(inventory.url, {
      method: 'POST',
      path: '/v1/pets',
      headers: { 'Content-Type': 'application/json; charset=utf-8', [UPSTREAM_TOKEN_HEADER]: await inventory.token() },
      body: validPet,
    });
    expect(res.status).toBe(201);
  });
});
