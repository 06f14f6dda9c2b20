import { hash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * Key format: `<prefix><secret>`, e.g. `asg_live_4fZ0…`. The prefix names the environment and ends
 * with `_`; the secret is base62, so it never contains `_` and a key splits unambiguously.
 *
 * A key issued now has a secret of RANDOM_LENGTH random characters followed by CHECKSUM_LENGTH
 * characters of checksum (CONTRACT §4, key checksum): CRC32 of everything before it (prefix
 * included), in base62, zero-padded. A secret scanner (gitleaks, GitHub secret scanning) matching
 * `asg_(live|test|dev)_[0-9A-Za-z]{38}` can check it offline and tell a real key from a random
 * string; the gateway refuses a secret of that length whose checksum fails without asking any
 * store. Keys issued before (32 random characters, no checksum) keep working.
 */
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** 32 base62 characters carry 32 · log2(62) ≈ 190 bits, comfortably over the 128 the contract asks. */
export const RANDOM_LENGTH = 32;

/** 62^6 ≈ 5.7 · 10^10 > 2^32: six base62 characters hold any CRC32. */
export const CHECKSUM_LENGTH = 6;

/** The secret of a key issued now: random part, then checksum. */
export const SECRET_LENGTH = RANDOM_LENGTH + CHECKSUM_LENGTH;

/** The secret of a key issued before checksums (no checksum to check): still admitted. */
export const LEGACY_SECRET_LENGTH = 32;

/** Fewest secret characters a presented key may have: 22 base62 characters are the first ≥ 128 bits. */
const MIN_SECRET_LENGTH = 22;

/** Anything longer is refused before hashing, so a huge header costs nothing. */
export const MAX_KEY_LENGTH = 200;

const PREFIX_PATTERN = /^[a-z]+_[a-z]+_$/;
const SECRET_PATTERN = /^[0-9A-Za-z]+$/;

function assertPrefix(prefix: string): void {
  if (!PREFIX_PATTERN.test(prefix)) throw new Error(`key prefix must look like asg_live_ (got "${prefix}")`);
}

/**
 * Uniform base62 characters from crypto.randomBytes. Bytes ≥ 248 (= 4 · 62) are rejected, so every
 * character has probability exactly 1/62; `byte % 62` alone would favour the first eight.
 */
function randomBase62(length: number): string {
  const limit = 256 - (256 % BASE62.length);
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte >= limit) continue;
      out += BASE62[byte % BASE62.length];
      if (out.length === length) break;
    }
  }
  return out;
}

/** CRC32 of `body` as CHECKSUM_LENGTH base62 characters, most significant first. */
export function keyChecksum(body: string): string {
  let value = crc32(body);
  let out = '';
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out;
}

/** A new API key. The caller shows it once and stores only `hashApiKey(key)`. */
export function generateApiKey(prefix: string): string {
  assertPrefix(prefix);
  const body = prefix + randomBase62(RANDOM_LENGTH);
  return body + keyChecksum(body);
}

/**
 * A key of the pre-checksum format (32 random characters): what keys issued before looked like.
 * Only tests and tools that need such a key call it; nothing issues one any more.
 */
export function generateLegacyApiKey(prefix: string): string {
  assertPrefix(prefix);
  return prefix + randomBase62(LEGACY_SECRET_LENGTH);
}

/**
 * True when a well-formed key (isWellFormedKey) is proven never issued by its own characters: its
 * secret has the length of a checksummed secret and the checksum does not match. Keys issued
 * before checksums are 32 characters long and never meet this test. A CRC32 over a string of at
 * most 200 characters: no store, no allocation beyond the checksum string.
 */
export function failsChecksum(presented: string, prefix: string): boolean {
  if (presented.length !== prefix.length + SECRET_LENGTH) return false;
  const split = presented.length - CHECKSUM_LENGTH;
  return keyChecksum(presented.slice(0, split)) !== presented.slice(split);
}

/** SHA-256 of the whole key, hex. A key has ≥ 128 random bits, so a fast hash without salt is enough. */
export function hashApiKey(key: string): string {
  // crypto.hash is the one-shot form: no Hash object per call on the request path.
  return hash('sha256', key, 'hex');
}

/** Record id, independent of the key so ids can be logged and shown without weakening the key. */
export function generateKeyId(): string {
  return 'key_' + randomBytes(12).toString('hex');
}

/** The key id shape `generateKeyId` produces; lets the admin layer refuse garbage ids early. */
export function isKeyId(value: string): boolean {
  return /^key_[0-9a-f]{24}$/.test(value);
}

/** True when `presented` starts with this environment's prefix. */
export function hasPrefix(prefix: string, presented: string): boolean {
  return presented.startsWith(prefix);
}

/**
 * Cheap syntactic check, before any hashing or store lookup: this environment's prefix, then only
 * base62 with at least 128 bits' worth of characters, and at most MAX_KEY_LENGTH in all. A key of
 * another environment, a truncated key or garbage is refused here.
 */
export function isWellFormedKey(prefix: string, presented: unknown): presented is string {
  if (typeof presented !== 'string') return false;
  if (presented.length > MAX_KEY_LENGTH) return false;
  if (!hasPrefix(prefix, presented)) return false;
  const secret = presented.slice(prefix.length);
  return secret.length >= MIN_SECRET_LENGTH && SECRET_PATTERN.test(secret);
}
