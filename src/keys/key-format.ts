import { hash, randomBytes } from 'node:crypto';

/**
 * Key format: `<prefix><secret>`, e.g. `asg_live_4fZ0…`. The prefix names the environment and ends
 * with `_`; the secret is base62, so it never contains `_` and a key splits unambiguously.
 */
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** 32 base62 characters carry 32 · log2(62) ≈ 190 bits, comfortably over the 128 the contract asks. */
export const SECRET_LENGTH = 32;

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

/** A new API key. The caller shows it once and stores only `hashApiKey(key)`. */
export function generateApiKey(prefix: string): string {
  assertPrefix(prefix);
  return prefix + randomBase62(SECRET_LENGTH);
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
