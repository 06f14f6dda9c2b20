import Redis, { type RedisOptions } from 'ioredis';

/** ioredis's options; the replies in its default (RESP2, "legacy") shape, as every other client of the gateway. */
type SentinelClientOptions = RedisOptions & { replyMapping?: 'legacy' };

/** Status events, in the order ioredis emits them; an `end` straight after `connecting` is an aborted attempt. */
const STATUS_EVENTS = new Set<string | symbol>(['connecting', 'connect', 'ready', 'close', 'reconnecting', 'end']);

/**
 * A Redis client behind Sentinel that ends only when its owner closes it.
 *
 * ioredis 6 ends a Sentinel client for good (status `end`: every command then fails with "Stream
 * isn't writeable", and nothing reconnects) when a disconnect reaches it while it is asking the
 * sentinels where the primary is: its failover detector hears `+switch-master` and disconnects, the
 * attempt in progress sees the disconnect and rejects with "Connection is closed.", and ioredis
 * takes a rejected attempt for a close. After a primary dies the client spends its reconnect loop
 * asking the sentinels, the longer the busier the machine, so the promotion's notice lands in an
 * attempt more often the more loaded the machine is: two gateway instances stayed off the promoted
 * replica (admin 500s for more than 60 s, `gateway_store_degraded 1`) on a 2-core machine at load
 * 13-20. Here such an end is one more failed attempt: the client tries again after its
 * `retryStrategy`'s delay, and the sentinels name the new primary. Its owners see no `end` for it:
 * to them (the stores' subscribers) `end` means the connection is gone for good and is replaced.
 *
 * `duplicate()` makes another of these (subscribers, the replication wait's connection), so every
 * connection of the gateway behind Sentinel comes back the same way.
 */
export class SentinelClient extends Redis {
  private closedByOwner = false;
  private lastStatusEvent: string | symbol | null = null;
  /** Set between an aborted attempt and the next one (ours, not ioredis's reconnect). */
  private retryTimer: NodeJS.Timeout | null = null;
  private abortedAttempts = 0;

  constructor(options: RedisOptions) {
    super(options as SentinelClientOptions);
  }

  /**
   * The owners of a connection (the key and consumer stores' subscribers) read `end` as "gone for
   * good" and open another; an aborted attempt is not that, so its `end` is not passed on.
   */
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'end' && this.lastStatusEvent === 'connecting' && !this.closedByOwner) {
      this.retryAfterAbort();
      return false;
    }
    if (STATUS_EVENTS.has(event)) this.lastStatusEvent = event;
    if (event === 'ready') this.abortedAttempts = 0;
    return super.emit(event, ...args);
  }

  override disconnect(reconnect = false): void {
    if (reconnect) return super.disconnect(true);
    this.closedByOwner = true;
    const betweenAttempts = this.retryTimer !== null;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    // Also lets go of the failover detector's connections to the sentinels.
    super.disconnect();
    if (betweenAttempts) {
      // Nothing of ioredis's was open, so nothing of it will say so: the end is ours to announce.
      this.status = 'end';
      process.nextTick(() => this.emit('end'));
    }
  }

  /** One more attempt after `retryStrategy`'s delay, announced as ioredis announces its own. */
  private retryAfterAbort(): void {
    const delay = this.options.retryStrategy?.(++this.abortedAttempts);
    const delayMs = typeof delay === 'number' ? delay : 0;
    this.status = 'reconnecting';
    this.lastStatusEvent = 'reconnecting';
    super.emit('reconnecting', delayMs);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      // A failed attempt emits 'error' (the owner's listener logs it) and, if aborted again, comes back here.
      if (!this.closedByOwner) this.connect().catch(() => {});
    }, delayMs);
  }
}

// duplicate() keeps ioredis's signature (its reply-mapping generics) and makes another SentinelClient.
SentinelClient.prototype.duplicate = function duplicate(this: SentinelClient, override?: Partial<RedisOptions>) {
  return new SentinelClient({ ...this.options, ...override });
} as Redis['duplicate'];
