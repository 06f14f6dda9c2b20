import {
  exportLine,
  ImportLineError,
  linesOf,
  MAX_IMPORT_LINE_BYTES,
  parseExport,
  type ImportRules,
} from '../../../src/keys/key-export';
import { generateKeyId, hashApiKey } from '../../../src/keys/key-format';
import type { ApiKeyRecord } from '../../../src/keys/types';
import { keyRecordFixture } from '../../support/key-record';

const PREFIX = 'asg_test_';
const RULES: ImportRules = { prefix: PREFIX, largestCost: 1, check: () => null };

function record(overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return keyRecordFixture({
    id: generateKeyId(),
    name: 'metered',
    plan: 'enterprise',
    limits: { perMinute: 10, perDay: 100, perMonth: 1000 },
    hash: hashApiKey(`${PREFIX}abcdefghijklmnopqrstuvwxyz`),
    ...overrides,
  });
}

describe('export lines: month quota and billing day', () => {
  it('carries perMonth and a billing day through export and import', () => {
    const metered = record({ billingDay: 17 });
    const line = exportLine(metered, PREFIX);
    expect(JSON.parse(line)).toMatchObject({ limits: { perMinute: 10, perDay: 100, perMonth: 1000 }, billingDay: 17 });
    expect(parseExport(line, RULES)).toEqual([metered]);
  });

  it('writes no billingDay for the default (the 1st), so older exports and new ones of the same key are equal', () => {
    const plain = record({ limits: null, plan: 'free' });
    const line = exportLine(plain, PREFIX);
    expect(line).not.toContain('billingDay');
    expect(exportLine({ ...plain, billingDay: 1 }, PREFIX)).toBe(line);
    expect(parseExport(JSON.stringify({ ...JSON.parse(line), billingDay: 1 }), RULES)).toEqual([plain]);
  });

  it.each([29, 0, 'x', 2.5])('refuses billingDay %p, naming the line', (billingDay) => {
    const line = JSON.stringify({ ...JSON.parse(exportLine(record(), PREFIX)), billingDay });
    expect(() => parseExport(line, RULES)).toThrow('line 1: billingDay must be a whole number from 1 to 28');
  });
});

describe('import lines are validated as the admin API validates a key (CONTRACT §4)', () => {
  const lineWith = (fields: Record<string, unknown>) =>
    JSON.stringify({ ...JSON.parse(exportLine(record(), PREFIX)), ...fields });

  it.each([
    [
      'an instant that does not exist',
      { expiresAt: '2020-13-45T99:99:99Z' },
      /line 1: expiresAt is missing or not an RFC 3339 instant/,
    ],
    ['February 31st', { createdAt: '2030-02-31T00:00:00Z' }, /line 1: createdAt is missing or not an RFC 3339 instant/],
    [
      'a name with a lone surrogate',
      { name: 'half \ud800 a pair' },
      /line 1: name must be text \(it holds a lone surrogate\)/,
    ],
    ['a name of 60 MB', { name: 'x'.repeat(201) }, /line 1: name must be 1 to 200 characters/],
    ['an empty name', { name: '   ' }, /line 1: name must be 1 to 200 characters/],
    [
      'limits with an unknown field',
      { limits: { perMinute: 10, perDay: 100, burst: 5 } },
      /line 1: limits has unknown field burst/,
    ],
    ['a field no export writes', { kind: 'key' }, /line 1: unknown field "kind": not one an export writes/],
    [
      'createdAt after the import (beyond a clock skew of 5 minutes)',
      { createdAt: new Date(Date.now() + 3_600_000).toISOString() },
      /line 1: createdAt .* is in the future: no gateway wrote it yet/,
    ],
    [
      'an old secret kept years after the rotation',
      { previousHash: 'b'.repeat(64), previousKeyExpiresAt: '2040-01-01T00:00:00Z' },
      /line 1: previousKeyExpiresAt 2040-01-01T00:00:00Z is more than the longest rotation grace \(604800 s\) ahead/,
    ],
  ])('refuses %s, naming the line', (_what, fields, message) => {
    expect(() => parseExport(lineWith(fields), RULES)).toThrow(message);
  });

  it('takes a record written by a clock a minute ahead of this one, and a rotation with the longest grace', () => {
    const now = Date.parse('2026-06-01T00:00:00Z');
    const line = lineWith({
      createdAt: '2026-06-01T00:01:00Z',
      updatedAt: '2026-06-01T00:01:00Z',
      previousHash: 'b'.repeat(64),
      previousKeyExpiresAt: '2026-06-08T00:01:00Z',
    });
    expect(parseExport(line, { ...RULES, now })).toHaveLength(1);
  });

  it('refuses limits below the largest operation cost in force, as POST /admin/keys does', () => {
    const line = lineWith({ limits: { perMinute: 4, perDay: 100 } });
    expect(() => parseExport(line, { ...RULES, largestCost: 5 })).toThrow(
      /line 1: limits below the largest operation cost 5 \(config costs\) could never serve it: perMinute/,
    );
    expect(parseExport(line, { ...RULES, largestCost: 4 })).toHaveLength(1);
  });

  it('a lone surrogate escaped in JSON is refused on line 3, after two good lines', () => {
    const body = [
      exportLine(record(), PREFIX),
      exportLine(record({ hash: hashApiKey(`${PREFIX}second`) }), PREFIX),
      lineWith({ name: '\udc00' }),
    ].join('\n');
    expect(() => parseExport(body, RULES)).toThrow(/^line 3: name must be text/);
  });
});

describe('linesOf: a streamed body as lines', () => {
  async function* chunks(...parts: Array<string | Buffer>) {
    yield* parts;
  }
  it('joins a line split across chunks, a character split across chunks included, and keeps a last line without newline', async () => {
    const euro = Buffer.from('€');
    const got: string[] = [];
    for await (const line of linesOf(
      chunks(
        Buffer.from('ab'),
        Buffer.concat([Buffer.from('c\nd'), euro.subarray(0, 1)]),
        euro.subarray(1),
        Buffer.from('\n\nlast'),
      ),
    ))
      got.push(line);
    expect(got).toEqual(['abc', 'd€', '', 'last']);
  });

  it('refuses a line over 64 KiB as an ImportLineError naming it, before reading on', async () => {
    const read: string[] = [];
    let refused: unknown;
    try {
      for await (const line of linesOf(chunks('first\n', 'x'.repeat(64 * 1024 + 1), '\nnever read\n'))) read.push(line);
    } catch (err) {
      refused = err;
    }
    expect(read).toEqual(['first']);
    expect(refused).toBeInstanceOf(ImportLineError);
    expect((refused as Error).message).toBe("line 2: longer than 65536 bytes (an export's lines are a few KB at most)");
  });

  it('splits a 2 MiB line arriving 16 bytes at a time in one pass (joined and split again per chunk: some 10^11 characters looked at)', async () => {
    async function* sixteenBytesAtATime() {
      const chunk = Buffer.from('abcdefghijklmnop');
      for (let i = 1; i <= 131_072; i++) {
        yield chunk;
        // A turn of the event loop now and then, as a socket gives: the test's hang guard can fire.
        if (i % 4096 === 0) await new Promise(setImmediate);
      }
      yield Buffer.from('\n');
    }
    const lines: string[] = [];
    for await (const line of linesOf(sixteenBytesAtATime(), 4 * 1024 * 1024)) lines.push(line);
    expect(lines.map((line) => line.length)).toEqual([2 * 1024 * 1024]);
  }, 30_000);
});

test('the longest valid line fits ten times under the cap: a 200-character name of escaped control characters, 100 of the longest IPv6 ranges, every field set', () => {
  const longest = record({
    name: '\u0001'.repeat(200),
    limits: {
      perMinute: Number.MAX_SAFE_INTEGER,
      perDay: Number.MAX_SAFE_INTEGER,
      perMonth: Number.MAX_SAFE_INTEGER,
      shadow: false,
      maxInFlight: 10_000,
    },
    previousHash: hashApiKey(`${PREFIX}previous`),
    previousKeyExpiresAt: '2026-01-02T00:00:00.000Z',
    revokedAt: '2026-01-02T00:00:00.000Z',
    expiresAt: '2030-01-01T00:00:00.000Z',
    billingDay: 28,
    consumerId: 'con_' + 'f'.repeat(24),
    allowedOperations: ['listPets', 'createPet', 'getPet'],
    allowedAddresses: Array.from(
      { length: 100 },
      (_, i) => `ffff:ffff:ffff:ffff:ffff:ffff:ffff:${(0xff00 + i).toString(16)}/128`,
    ),
  });
  const line = exportLine(longest, PREFIX);
  expect(parseExport(line, RULES)).toEqual([longest]);
  expect(Buffer.byteLength(line)).toBeLessThan(MAX_IMPORT_LINE_BYTES / 10);
});

test('a name with control characters imports as the admin API takes it (every view escapes it)', () => {
  const line = JSON.stringify({ ...JSON.parse(exportLine(record(), PREFIX)), name: 'evil \u001b[2J' });
  expect(parseExport(line, RULES)[0]!.name).toBe('evil \u001b[2J');
});
