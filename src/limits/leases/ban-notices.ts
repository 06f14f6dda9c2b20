import { Listeners } from '../../shared/listeners';
import { ChangeFeed } from '../../shared/redis/change-feed';
import type { RedisClient } from '../../shared/redis/redis';

/**
 * Bans told to every instance at once (docs/scaling.md "Leases"): a ban is set in Redis by the
 * instance whose refusal crossed the threshold, but an instance holding a lease of that key would
 * go on admitting from it, with no round trip, until the lease ends. The banning instance publishes
 * the key id; every instance ends its lease of that key (its unused units go back), so the key's
 * next request there goes to Redis and meets the ban.
 */
export interface BanNotices {
  /** This instance's refusal banned `keyId` (not awaited: a lost notice leaves the lease's 500 ms at most). */
  publish(keyId: string): void;
  /** `listener(keyId)` for each ban any instance publishes, this one's included. */
  onBan(listener: (keyId: string) => void): () => void;
  /**
   * `listener()` when notices may have been missed: the subscription came back after its connection
   * dropped, and what was published meanwhile is lost. The listener ends every lease, so each key's
   * next request meets Redis, which holds every ban.
   */
  onMissed(listener: () => void): () => void;
  close(): Promise<void>;
}

/** The channel of a namespace's ban notices (a channel, not a key: no hash tag, any Cluster node). */
export function banNoticesChannel(namespace: string): string {
  return `${namespace}:rl:lease-bans`;
}

/** A first subscription that failed (Redis away at start) is tried again this often, until it works or closes. */
const RESUBSCRIBE_MS = 1_000;

export function redisBanNotices(redis: RedisClient, namespace: string): BanNotices {
  const channel = banNoticesChannel(namespace);
  const bans = new Listeners<[string]>();
  const missed = new Listeners<[]>();
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  // The feed keeps an established subscription by itself (change-feed.ts); one that never got
  // going would leave this instance deaf to bans for good, so it is opened again.
  const open = (): ChangeFeed => {
    const feed = new ChangeFeed(redis, { channel });
    feed.onMessage((keyId) => bans.emit(keyId));
    feed.onResync(() => missed.emit());
    feed.ready().catch(() => {
      void feed.close();
      if (closed) return;
      retry = setTimeout(() => (current = open()), RESUBSCRIBE_MS);
      retry.unref();
    });
    return feed;
  };
  let current = open();
  return {
    publish(keyId) {
      redis.publish(channel, keyId).catch(() => {});
    },
    onBan: (listener) => bans.add(listener),
    onMissed: (listener) => missed.add(listener),
    async close() {
      closed = true;
      clearTimeout(retry);
      bans.clear();
      missed.clear();
      await current.close();
    },
  };
}
