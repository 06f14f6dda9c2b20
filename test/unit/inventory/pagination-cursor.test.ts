import { decodeCursor, encodeCursor } from '../../../src/inventory/pagination-cursor';

describe('pagination cursor', () => {
  it.each([1, 20, 123456, Number.MAX_SAFE_INTEGER])('round-trips %d', (id) => {
    const cursor = encodeCursor(id);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(cursor)).toBe(id);
  });

  it('refuses to encode a position that is not a positive safe integer', () => {
    expect(() => encodeCursor(0)).toThrow(RangeError);
    expect(() => encodeCursor(1.5)).toThrow(RangeError);
    expect(() => encodeCursor(2 ** 53)).toThrow(RangeError);
  });

  const b64 = (s: string) => Buffer.from(s).toString('base64url');

  it.each([
    ['empty', ''],
    ['not base64url', 'abc$'],
    ['standard base64 padding', `${encodeCursor(5)}=`],
    ['plain digits', '5'],
    ['other version', b64('v2:5')],
    ['zero', b64('v1:0')],
    ['negative', b64('v1:-5')],
    ['leading zero', b64('v1:05')],
    ['beyond 2^53', b64('v1:9007199254740993')],
    ['trailing junk', b64('v1:5 ')],
    ['JSON instead', b64('{"after":5}')],
    ['too long', 'A'.repeat(65)],
  ])('refuses %s', (_label, cursor) => {
    expect(decodeCursor(cursor)).toBeNull();
  });

  it('refuses every one-character change of a real cursor that does not spell another canonical cursor', () => {
    const cursor = encodeCursor(1234);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    let accepted = 0;
    let tried = 0;
    for (let i = 0; i < cursor.length; i += 1) {
      for (const c of alphabet) {
        if (c === cursor[i]) continue;
        tried += 1;
        const tampered = cursor.slice(0, i) + c + cursor.slice(i + 1);
        const decoded = decodeCursor(tampered);
        if (decoded !== null) {
          accepted += 1;
          // Accepted only when it is exactly the canonical cursor of the decoded position.
          expect(encodeCursor(decoded)).toBe(tampered);
        }
      }
    }
    // Only edits that turn one digit into another survive (about 4 %); everything else is refused.
    expect(accepted / tried).toBeLessThan(0.1);
  });
});
