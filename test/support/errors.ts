/** An answer read whole, whichever client read it (supertest, the TLS client, a raw socket): status, parsed body, headers. */
export interface AnswerWithBody {
  status: number;
  body: unknown;
  headers: Record<string, string | string[] | undefined>;
}

/** The contract's Error body: JSON `{code, message, status}` with `status` equal to the HTTP status. */
export function expectError(res: AnswerWithBody, status: number, code: string): void {
  expect({ status: res.status, body: res.body }).toEqual({ status, body: { code, message: expect.any(String), status } });
  const type = res.headers['content-type'];
  expect(Array.isArray(type) ? type.join(', ') : type).toMatch(/^application\/json/);
}
