import { Listeners } from '../listeners';
import { duplicateForSubscribe, type RedisClient } from './redis';

export interface ChangeFeedOptions {
  /** The channel every write of these records publishes on. */
  channel: string;
  /**
   * Connection for SUBSCRIBE. A client is used as given and left open on close; a factory's client
   * and the default (`duplicateForSubscribe(redis)`) are the feed's and closed on close.
   */
  subscriber?: RedisClient | (() => Promise<RedisClient>);
}

interface Subscription {
  client: RedisClient;
  /** Created by this feed (closed on close, replaced when it ends), not given by the caller. */
  owned: boolean;
}

/**
 * Closes a subscriber connection and waits until its socket is really gone, so close() leaves
 * nothing open behind. disconnect() rather than QUIT: a subscriber has no replies left to wait for,
 * and only disconnect() also closes a Sentinel client's failover-detector connections to the
 * sentinels (ioredis 6), which QUIT leaves open on 60-second reconnect timers.
 */
export async function disconnectAndWait(client: RedisClient, timeoutMs = 1000): Promise<void> {
  if (client.status === 'end') return;
  const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
  client.disconnect();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([ended, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
  clearTimeout(timer);
}

/**
 * The change feed of records kept in Redis (keys, consumers): one channel every write publishes
 * on, heard by every instance within a second. What a subscription can miss is told as a resync,
 * after which the listener reads everything again:
 * - a reconnect (ioredis subscribes again by itself; what was published meanwhile is lost): the
 *   resync comes once a PING queued behind the new SUBSCRIBE answers, so nothing published after
 *   it is missed;
 * - a subscriber connection that ended for good (a Cluster node lost: the feed's connection to it
 *   gives up reconnecting): a new one is opened, on a master that answers, retried every second
 *   until it works or the feed closes, then the resync.
 */
export class ChangeFeed {
  private readonly messages = new Listeners<[string]>();
  private readonly resyncs = new Listeners<[]>();
  /** The first subscription; `ready()` waits for it. */
  private readonly subscription: Promise<Subscription>;
  /** The subscription in use: the first, or the one that replaced it after its connection ended. */
  private current: Subscription | null = null;
  private readonly deliver = (channel: string, message: string) => {
    if (channel === this.options.channel && !this.closed) this.messages.emit(message);
  };
  private readonly onReady = () => this.resubscribed();
  private readonly onEnd = () => this.replaceSubscriber();
  private reopenTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly options: ChangeFeedOptions,
  ) {
    this.subscription = this.subscribe();
    // Surfaced by ready(); without this a failed subscription would be an unhandled rejection.
    this.subscription.catch(() => {});
  }

  /** A feed whose subscription is active, so no message published after this returns is missed. */
  static async open(redis: RedisClient, options: ChangeFeedOptions): Promise<ChangeFeed> {
    const feed = new ChangeFeed(redis, options);
    try {
      await feed.ready();
    } catch (err) {
      await feed.close().catch(() => {});
      throw err;
    }
    return feed;
  }

  /** Resolves once SUBSCRIBE succeeded; rejects if the subscriber could not be set up. */
  async ready(): Promise<void> {
    await this.subscription;
  }

  /** Each message published on the channel, as published; returns an unsubscribe. */
  onMessage(listener: (message: string) => void): () => void {
    return this.messages.add(listener);
  }

  /** Called when messages may have been missed: read everything again. */
  onResync(listener: () => void): () => void {
    return this.resyncs.add(listener);
  }

  /** Unsubscribes and closes the connections this feed created; the command connection is the caller's. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.messages.clear();
    this.resyncs.clear();
    clearTimeout(this.reopenTimer);
    try {
      await this.subscription;
    } catch {
      return;
    }
    const { client, owned } = this.current!;
    this.detach(client);
    if (owned) {
      await disconnectAndWait(client);
    } else {
      await client.unsubscribe(this.options.channel).catch(() => {});
    }
  }

  private async subscribe(): Promise<Subscription> {
    const given = this.options.subscriber;
    const owned = typeof given !== 'object';
    const client = typeof given === 'function' ? await given() : (given ?? (await duplicateForSubscribe(this.redis)));
    client.on('message', this.deliver);
    try {
      await client.subscribe(this.options.channel);
    } catch (err) {
      client.off('message', this.deliver);
      if (owned) client.disconnect();
      throw err;
    }
    client.on('ready', this.onReady);
    // A connection of ours that gives up reconnecting (a Cluster subscriber whose node is gone) is
    // replaced; a single Redis connection keeps reconnecting and never ends before close().
    if (owned) client.on('end', this.onEnd);
    this.current = { client, owned };
    return this.current;
  }

  private detach(client: RedisClient): void {
    client.off('message', this.deliver);
    client.off('ready', this.onReady);
    client.off('end', this.onEnd);
  }

  private replaceSubscriber(): void {
    if (this.closed || !this.current) return;
    this.detach(this.current.client);
    const attempt = async () => {
      let next: Subscription;
      try {
        next = await this.subscribe();
      } catch {
        if (!this.closed) {
          this.reopenTimer = setTimeout(attempt, 1000);
          this.reopenTimer.unref();
        }
        return;
      }
      if (this.closed) {
        // close() already ran on the connection that ended; this one is left to us.
        this.detach(next.client);
        await disconnectAndWait(next.client);
        return;
      }
      this.resyncs.emit();
    };
    void attempt();
  }

  private resubscribed(): void {
    setImmediate(() => {
      if (this.closed) return;
      Promise.resolve(this.current?.client.ping())
        .catch(() => {})
        .finally(() => {
          if (!this.closed) this.resyncs.emit();
        });
    });
  }
}
