import { createHash } from 'node:crypto';
import {
  generateApiKey,
  generateKeyId,
  hashApiKey,
  hasPrefix,
  isKeyId,
  isWellFormedKey,
  MAX_KEY_LENGTH,
  SECRET_LENGTH,
} from '../../../src/keys/key-format';

const PREFIX = 'asg_live_';
const BASE62 = /^[0-9A-Za-z]+$/;

describe('generateApiKey', () => {
  it('starts with the prefix and carries at least 128 bits of base62 after it', () => {
    const key = generateApiKey(PREFIX);
    expect(key.startsWith(PREFIX)).toBe(true);
    const secret = key.slice(PREFIX.length);
    expect(secret).toHaveLength(SECRET_LENGTH);
    expect(secret).toMatch(BASE62);
    expect(secret.length * Math.log2(62)).toBeGreaterThanOrEqual(128);
  });

  it('never puts an underscore after the prefix', () => {
    for (let i = 0; i < 500; i++) expect(generateApiKey('asg_dev_').slice('asg_dev_'.length)).not.toContain('_');
  });

  it('is unique over many keys', () => {
    const keys = new Set(Array.from({ length: 20_000 }, () => generateApiKey(PREFIX)));
    expect(keys.size).toBe(20_000);
  });

  it('uses the whole base62 alphabet', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 300; i++) for (const c of generateApiKey(PREFIX).slice(PREFIX.length)) seen.add(c);
    expect(seen.size).toBe(62);
  });

  it.each(['asg_live', 'ASG_LIVE_', 'asg_', '', 'asg live_'])('refuses the malformed prefix %p', (prefix) => {
    expect(() => generateApiKey(prefix)).toThrow(/prefix/);
  });
});

describe('hashApiKey', () => {
  it('is SHA-256 hex of the whole key', () => {
    expect(hashApiKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    const key = generateApiKey(PREFIX);
    expect(hashApiKey(key)).toBe(createHash('sha256').update(key).digest('hex'));
    expect(hashApiKey(key)).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('generateKeyId', () => {
  it('is key_ plus 24 hex characters, unique, and matches isKeyId', () => {
    const ids = new Set(Array.from({ length: 5000 }, () => generateKeyId()));
    expect(ids.size).toBe(5000);
    for (const id of ids) {
      expect(id).toMatch(/^key_[0-9a-f]{24}$/);
      expect(isKeyId(id)).toBe(true);
    }
    expect(isKeyId('key_xyz')).toBe(false);
    expect(isKeyId('../key_' + '0'.repeat(24))).toBe(false);
  });
});

describe('isWellFormedKey', () => {
  it('accepts a key this environment generated', () => {
    const key = generateApiKey(PREFIX);
    expect(hasPrefix(PREFIX, key)).toBe(true);
    expect(isWellFormedKey(PREFIX, key)).toBe(true);
  });

  it('refuses a key of another environment', () => {
    const staging = generateApiKey('asg_test_');
    expect(hasPrefix(PREFIX, staging)).toBe(false);
    expect(isWellFormedKey(PREFIX, staging)).toBe(false);
    expect(isWellFormedKey('asg_dev_', generateApiKey('asg_live_'))).toBe(false);
  });

  it.each([
    ['empty', ''],
    ['prefix only', PREFIX],
    ['too short to hold 128 bits', PREFIX + 'a'.repeat(21)],
    ['an underscore in the secret', PREFIX + 'a'.repeat(16) + '_' + 'b'.repeat(16)],
    ['a dash in the secret', PREFIX + 'a'.repeat(16) + '-' + 'b'.repeat(16)],
    ['whitespace', PREFIX + 'a'.repeat(31) + ' '],
    ['non-ASCII', PREFIX + 'é'.repeat(32)],
    ['a prefix in another case', 'ASG_LIVE_' + 'a'.repeat(32)],
    ['garbage', 'Bearer nonsense'],
    ['over the length bound', PREFIX + 'a'.repeat(MAX_KEY_LENGTH)],
  ])('refuses %s', (_label, presented) => {
    expect(isWellFormedKey(PREFIX, presented)).toBe(false);
  });

  it('accepts up to MAX_KEY_LENGTH characters and no more', () => {
    const atBound = PREFIX + 'a'.repeat(MAX_KEY_LENGTH - PREFIX.length);
    expect(isWellFormedKey(PREFIX, atBound)).toBe(true);
    expect(isWellFormedKey(PREFIX, atBound + 'a')).toBe(false);
  });

  it('refuses values that are not strings', () => {
    expect(isWellFormedKey(PREFIX, undefined)).toBe(false);
    expect(isWellFormedKey(PREFIX, null)).toBe(false);
    expect(isWellFormedKey(PREFIX, ['asg_live_' + 'a'.repeat(32)])).toBe(false);
  });
});
