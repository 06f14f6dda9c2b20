import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import {
  CHECKSUM_LENGTH,
  failsChecksum,
  generateApiKey,
  generateLegacyApiKey,
  keyChecksum,
  LEGACY_SECRET_LENGTH,
  RANDOM_LENGTH,
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

/** The other base62 character at `index` of `key`: a one-character typo, or a forgery's guess. */
function changedAt(key: string, index: number): string {
  const c = key[index]!;
  return key.slice(0, index) + (c === 'a' ? 'b' : 'a') + key.slice(index + 1);
}

describe('key checksum (CONTRACT §4)', () => {
  it('a new key is the prefix, 32 random characters, then 6 of CRC32 of all before them, in base62', () => {
    const key = generateApiKey(PREFIX);
    expect(SECRET_LENGTH).toBe(38);
    expect(key).toMatch(/^asg_(live|test|dev)_[0-9A-Za-z]{38}$/);
    const body = key.slice(0, PREFIX.length + RANDOM_LENGTH);
    const checksum = key.slice(-CHECKSUM_LENGTH);
    // Decoded by hand, independently of keyChecksum: base62 digits, most significant first.
    const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
    const decoded = [...checksum].reduce((value, c) => value * 62 + alphabet.indexOf(c), 0);
    expect(decoded).toBe(crc32(body));
    expect(keyChecksum(body)).toBe(checksum);
    expect(failsChecksum(key, PREFIX)).toBe(false);
  });

  it('round trips over many keys and every environment', () => {
    for (const prefix of ['asg_live_', 'asg_test_', 'asg_dev_']) {
      for (let i = 0; i < 300; i++) {
        const key = generateApiKey(prefix);
        expect(failsChecksum(key, prefix)).toBe(false);
        expect(isWellFormedKey(prefix, key)).toBe(true);
      }
    }
  });

  it('pads a small CRC with zeros to 6 characters', () => {
    // CRC32 of the empty string is 0.
    expect(keyChecksum('')).toBe('000000');
    expect(keyChecksum('abc')).toHaveLength(CHECKSUM_LENGTH);
  });

  it('a key with any one character changed fails its checksum', () => {
    const key = generateApiKey(PREFIX);
    for (let index = PREFIX.length; index < key.length; index++) {
      const changed = changedAt(key, index);
      expect({ index, fails: failsChecksum(changed, PREFIX) }).toEqual({ index, fails: true });
    }
    // The prefix is inside the checksum too: a live key relabelled as a test key does not pass.
    const relabelled = 'asg_test_' + key.slice(PREFIX.length);
    expect(failsChecksum(relabelled, 'asg_test_')).toBe(true);
  });

  it('made-up secrets of the new length fail (all but about 1 in 62^6)', () => {
    let passed = 0;
    for (let i = 0; i < 2000; i++) if (!failsChecksum(generateLegacyApiKey(PREFIX) + 'abcdef', PREFIX)) passed++;
    expect(passed).toBe(0);
  });

  it('keys issued before checksums (32 characters) and other lengths are never refused by it', () => {
    const legacy = generateLegacyApiKey(PREFIX);
    expect(legacy.length - PREFIX.length).toBe(LEGACY_SECRET_LENGTH);
    expect(isWellFormedKey(PREFIX, legacy)).toBe(true);
    expect(failsChecksum(legacy, PREFIX)).toBe(false);
    expect(failsChecksum(PREFIX + 'a'.repeat(37), PREFIX)).toBe(false);
    expect(failsChecksum(PREFIX + 'a'.repeat(39), PREFIX)).toBe(false);
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
