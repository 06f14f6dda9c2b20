/**
 * The `cursor` of GET /v1/pets: base64url of `v1:<id of the last pet on the previous page>`.
 *
 * It is opaque to clients but not secret, and not signed: it names only a position a client can
 * reach by walking anyway. Decoding is strict (only the canonical encoding of a well-formed
 * payload is accepted), so a mangled cursor is refused rather than silently reinterpreted.
 */
const PREFIX = 'v1:';
const MAX_CURSOR_LENGTH = 64;

export function encodeCursor(afterId: number): string {
  if (!Number.isSafeInteger(afterId) || afterId < 1)
    throw new RangeError(`cursor position must be a positive safe integer, got ${afterId}`);
  return Buffer.from(PREFIX + String(afterId), 'utf8').toString('base64url');
}

/** The id to continue after, or null when `cursor` is not one this service issued. */
export function decodeCursor(cursor: string): number | null {
  if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) return null;
  const payload = Buffer.from(cursor, 'base64url').toString('utf8');
  const match = /^v1:([1-9][0-9]{0,15})$/.exec(payload);
  if (!match) return null;
  const afterId = Number(match[1]);
  if (!Number.isSafeInteger(afterId)) return null;
  // Base64url has several spellings of the same bytes (trailing bits); only ours is accepted.
  return encodeCursor(afterId) === cursor ? afterId : null;
}
