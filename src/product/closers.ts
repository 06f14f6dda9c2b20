/**
 * What a start has opened, closed in reverse order: by `close()` on a stop, and on a failed start
 * by the starter that failed, so nothing opened before the failure is left running.
 */
export class Closers {
  private readonly pending: Array<() => Promise<void> | void> = [];
  /** Set once closing has begun (/readyz answers 503 from then on). */
  closing = false;

  add(close: () => Promise<void> | void): void {
    this.pending.push(close);
  }

  async closeAll(): Promise<void> {
    this.closing = true;
    while (this.pending.length > 0) await this.pending.pop()!();
  }
}
