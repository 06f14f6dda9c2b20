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
  close(): Promise<void>;
}

/** The channel of a namespace's ban notices (a channel, not a key: no hash tag, any Cluster node). */
export function banNoticesChannel(namespace: string): string {
  return `${namespace}:rl:lease-bans`;
}

export function redisBanNotices(redis: RedisClient, namespace: string): BanNotices {
  const channel = banNoticesChannel(namespace);
  const feed = new ChangeFeed(redis, { channel });
  return {
    publish(keyId) {
      redis.publish(channel, keyId).catch(() => {});
    },
    onBan: (listener) => feed.onMessage(listener),
    close: () => feed.close(),
  };
}
