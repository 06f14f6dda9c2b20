/** An answer read whole, whichever client read it (supertest, the TLS client, a raw socket): status, parsed body, headers. */
export interface AnswerWithBody {
  status: number;
  body: unknown;
  headers: Record<string, string | string[] | undefined>;
}

/** What a 429 rate_limited body may name as the window that refused it (CONTRACT §3). */
export const REFUSING_WINDOWS = [
  'minute',
  'day',
  'month',
  'consumer-minute',
  'consumer-day',
  'consumer-month',
  'anonymous',
  'hidden',
] as const;

/**
 * The contract's Error body: JSON `{code, message, status}` with `status` equal to the HTTP status;
 * a gateway's 429 rate_limited also names its `window` (one of REFUSING_WINDOWS; expectRefusedBy
 * checks which). The admin API's wrong-token lockout is a rate_limited of no window.
 */
export function expectError(res: AnswerWithBody, status: number, code: string): void {
  const named = code === 'rate_limited' && typeof res.body === 'object' && res.body !== null && 'window' in res.body;
  const window = named ? { window: expect.stringMatching(new RegExp(`^(${REFUSING_WINDOWS.join('|')})$`)) } : {};
  expect({ status: res.status, body: res.body }).toEqual({
    status,
    body: { code, message: expect.any(String), status, ...window },
  });
  const type = res.headers['content-type'];
  expect(Array.isArray(type) ? type.join(', ') : type).toMatch(/^application\/json/);
}

/** A 429 rate_limited answer whose body names `window` as the window that refused it. */
export function expectRefusedBy(res: AnswerWithBody, window: (typeof REFUSING_WINDOWS)[number]): void {
  expectError(res, 429, 'rate_limited');
  expect((res.body as { window?: unknown }).window).toBe(window);
}
