/**
 * Deadlines in Redis time for the consume scripts, so a decision Redis runs after the gateway gave
 * up on it (its command timeout, as behind a CLIENT PAUSE or a stalled primary) counts nothing: the
 * client was already answered 503 or decided on the fallback, and units counted then would be
 * refused to the key for the rest of its window.
 *
 * The script reads Redis TIME, so the deadline must be in Redis's clock. Each reply carries Redis's
 * `now`, and `now - sentAt` bounds the offset between the two clocks from above (Redis ran the
 * command after it was sent); the smallest bound of the last two periods is the tightest, the one a
 * reply that waited in no queue gives. A deadline too tight shows as a late refusal that reaches a
 * client still waiting (one the client gave up on is never read): its `now - sentAt` is a bound
 * too, and the largest of those in the last two periods is a floor the estimate never goes under.
 * So a local clock stepped back (or a Cluster master whose clock is ahead of the others') costs one
 * late refusal, and the next deadline is right. Before any reply there is no deadline.
 */

/** What a deadline adds beyond the timeout: the time between reading the clock and ioredis starting its timer, and clock drift within two periods. */
export const DEADLINE_MARGIN_MS = 50;
/** Bounds older than two of these are forgotten. */
const PERIOD_MS = 5_000;
/** The error a consume script answers past its deadline: `LATE <Redis now>`, nothing counted. */
export const LATE_REPLY = /^LATE (\d+)/;

/** The smallest reply bound and the largest late bound of one period. */
interface Bounds {
  reply: number;
  late: number;
}

const NONE: Readonly<Bounds> = { reply: Number.POSITIVE_INFINITY, late: Number.NEGATIVE_INFINITY };

export class CommandDeadline {
  private current: Bounds = { ...NONE };
  private previous: Bounds = { ...NONE };
  private periodEnds = 0;

  /** Periods turn on the send times the caller gives (its clock): no clock read of its own. */
  constructor(private readonly timeoutMs: number) {}

  /** The consume's `now` argument: `<` and the deadline in Redis time, or '' (Redis TIME, no deadline) before any reply. */
  argument(sentAt: number): string {
    this.turn(sentAt);
    const reply = Math.min(this.current.reply, this.previous.reply);
    const late = Math.max(this.current.late, this.previous.late);
    const offset = Math.max(reply === Number.POSITIVE_INFINITY ? Number.NEGATIVE_INFINITY : reply, late);
    if (offset === Number.NEGATIVE_INFINITY) return '';
    return `<${sentAt + this.timeoutMs + offset + DEADLINE_MARGIN_MS}`;
  }

  /** A reply to a command sent at `sentAt`, run at `redisNow` in Redis's clock. */
  observe(sentAt: number, redisNow: number): void {
    this.turn(sentAt);
    this.current.reply = Math.min(this.current.reply, redisNow - sentAt);
  }

  /** A late refusal a client still waited for: the deadline sent at `sentAt` was too tight. */
  observeLate(sentAt: number, redisNow: number): void {
    this.turn(sentAt);
    this.current.late = Math.max(this.current.late, redisNow - sentAt);
  }

  /** Redis's `now` in a late refusal's message, or null for any other error. */
  static lateAt(err: unknown): number | null {
    const match = err instanceof Error ? LATE_REPLY.exec(err.message) : null;
    return match ? Number(match[1]) : null;
  }

  private turn(at: number): void {
    if (at < this.periodEnds) return;
    // A gap of two periods or more forgets both.
    this.previous = at < this.periodEnds + PERIOD_MS ? this.current : { ...NONE };
    this.current = { ...NONE };
    this.periodEnds = at + PERIOD_MS;
  }
}
