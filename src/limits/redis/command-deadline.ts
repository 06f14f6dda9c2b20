/**
 * Deadlines in Redis time for the consume scripts, so a decision Redis runs after the gateway gave
 * up on it (its command timeout, as behind a CLIENT PAUSE or a stalled primary) counts nothing: the
 * client was already answered 503 or decided on the fallback, and units counted then would be
 * refused to the key for the rest of its window.
 *
 * The script reads Redis TIME, so the deadline must be in Redis's clock. Each reply (and each late
 * refusal) carries Redis's `now`; `now - sentAt` bounds the offset between the two clocks from above
 * (Redis ran the command after it was sent). The largest bound of the last two periods is used: a
 * command delayed in a queue only makes a deadline later, never earlier, and a local clock stepped
 * back shows in the very next reply (or late refusal), so a deadline is never tighter than the
 * client's own timeout for long. Before any reply there is no deadline.
 */

/** What a deadline adds beyond the timeout: the time between reading the clock and ioredis starting its timer. */
export const DEADLINE_MARGIN_MS = 50;
/** Bounds older than two of these are forgotten (a local clock stepped forward tightens deadlines again). */
const PERIOD_MS = 5_000;
/** The error a consume script answers past its deadline: `LATE <Redis now>`, nothing counted. */
export const LATE_REPLY = /^LATE (\d+)/;

export class CommandDeadline {
  private current = Number.NEGATIVE_INFINITY;
  private previous = Number.NEGATIVE_INFINITY;
  private periodEnds = 0;

  constructor(
    private readonly timeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The consume's `now` argument: `<` and the deadline in Redis time, or '' (Redis TIME, no deadline) before any reply. */
  argument(sentAt: number): string {
    this.turn(sentAt);
    const bound = Math.max(this.current, this.previous);
    if (bound === Number.NEGATIVE_INFINITY) return '';
    return `<${sentAt + this.timeoutMs + bound + DEADLINE_MARGIN_MS}`;
  }

  /** A reply (or a late refusal) of a command sent at `sentAt`, run at `redisNow` in Redis's clock. */
  observe(sentAt: number, redisNow: number): void {
    this.turn(this.now());
    this.current = Math.max(this.current, redisNow - sentAt);
  }

  /** Redis's `now` in a late refusal's message, or null for any other error. */
  static lateAt(err: unknown): number | null {
    const match = err instanceof Error ? LATE_REPLY.exec(err.message) : null;
    return match ? Number(match[1]) : null;
  }

  private turn(at: number): void {
    if (at < this.periodEnds) return;
    // A gap of two periods or more forgets both bounds.
    this.previous = at < this.periodEnds + PERIOD_MS ? this.current : Number.NEGATIVE_INFINITY;
    this.current = Number.NEGATIVE_INFINITY;
    this.periodEnds = at + PERIOD_MS;
  }
}
