/**
 * Runs `work` once this test file is done, after every afterAll hook of the file (the kit's
 * environment, test/support/kit-environment.js, does it; latest registered first). Outside that
 * environment, an afterAll hook does it instead.
 */
export function atFileEnd(work: () => Promise<void>): void {
  const pending = (globalThis as { __asgAtFileEnd?: Array<() => Promise<void>> }).__asgAtFileEnd;
  if (pending) pending.push(work);
  else afterAll(work);
}
