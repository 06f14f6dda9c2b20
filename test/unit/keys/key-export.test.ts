import { exportLine, parseExport } from '../../../src/keys/key-export';
import { generateKeyId, hashApiKey } from '../../../src/keys/key-format';
import type { ApiKeyRecord } from '../../../src/keys/types';
import { keyRecordFixture } from '../../support/key-record';

const PREFIX = 'asg_test_';

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
    expect(parseExport(line, PREFIX)).toEqual([metered]);
  });

  it('writes no billingDay for the default (the 1st), so older exports and new ones of the same key are equal', () => {
    const plain = record({ limits: null, plan: 'free' });
    const line = exportLine(plain, PREFIX);
    expect(line).not.toContain('billingDay');
    expect(exportLine({ ...plain, billingDay: 1 }, PREFIX)).toBe(line);
    expect(parseExport(JSON.stringify({ ...JSON.parse(line), billingDay: 1 }), PREFIX)).toEqual([plain]);
  });

  it.each([29, 0, 'x', 2.5])('refuses billingDay %p, naming the line', (billingDay) => {
    const line = JSON.stringify({ ...JSON.parse(exportLine(record(), PREFIX)), billingDay });
    expect(() => parseExport(line, PREFIX)).toThrow('line 1: billingDay must be a whole number from 1 to 28');
  });
});
