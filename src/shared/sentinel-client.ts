import Redis, { type RedisOptions } from 'ioredis';

/** ioredis's options; the replies in its default (RESP2, "legacy") shape, as every other client of the gateway. */
type SentinelClientOptions = RedisOptions & { replyMapping?: 'legacy' };

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
 * `retryStrategy`'s delay, and the sentinels name the new primary.
 *
 * `duplicate()` makes another of these (subscribers, the replication wait's connection), so every
 * connection of the gateway behind Sentinel comes back the same way.
 */
export class SentinelClient extends Redis {
  private closedByOwner = false;
  /** The status before the last change: an end straight from `connecting` is an aborted attempt. */
  private previousStatus: string = this.status;
  private retryTimer: NodeJS.Timeout | null = null;
  private abortedAttempts = 0;

  constructor(options: RedisOptions) {
    super(options as SentinelClientOptions);
    for (const status of ['connecting', 'connect', 'ready', 'close', 'reconnecting']) {
      this.on(status, () => {
        this.previousStatus = status;
        if (status === 'ready') this.abortedAttempts = 0;
      });
    }
    this.on('end', () => {
      const aborted = this.previousStatus === 'connecting';
      this.previousStatus = 'end';
      if (aborted && !this.closedByOwner) this.retryAfterAbort();
    });
  }

  override disconnect(reconnect = false): void {
    if (!reconnect) {
      this.closedByOwner = true;
      if (this.retryTimer) clearTimeout(this.retryTimer);
      this.retryTimer = null;
    }
    super.disconnect(reconnect);
  }

  private retryAfterAbort(): void {
    const delay = this.options.retryStrategy?.(++this.abortedAttempts);
    this.retryTimer = setTimeout(
      () => {
        this.retryTimer = null;
        // A failed attempt emits 'error' (the owner's listener logs it) and ends again, which comes back here.
        if (!this.closedByOwner && this.status === 'end') this.connect().catch(() => {});
      },
      typeof delay === 'number' ? delay : 0,
    );
  }
}

// duplicate() keeps ioredis's signature (its reply-mapping generics) and makes another SentinelClient.
SentinelClient.prototype.duplicate = function duplicate(this: SentinelClient, override?: Partial<RedisOptions>) {
  return new SentinelClient({ ...this.options, ...override });
} as Redis['duplicate'];
