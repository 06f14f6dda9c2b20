import type { Gauge } from 'prom-client';
import type { Logger } from '../../shared/logger';
import type { RedisClient } from '../../shared/redis/redis';

/**
 * Policies that never evict a key without a TTL. Key records have none, so these cannot drop them;
 * every `allkeys-*` policy can.
 */
const SAFE_POLICIES = new Set(['noeviction', 'volatile-lru', 'volatile-lfu', 'volatile-random', 'volatile-ttl']);

export type DurabilityRisk = 'persistence_off' | 'evicting_policy' | 'unknown';

/** What one node's settings say; null entries when CONFIG GET was refused (ACL, managed Redis). */
async function settingsOf(node: RedisClient): Promise<{ save: string; appendonly: string; policy: string } | null> {
  try {
    const read = async (name: string) => ((await node.config('GET', name)) as string[])[1] ?? '';
    const [save, appendonly, policy] = await Promise.all([read('save'), read('appendonly'), read('maxmemory-policy')]);
    return { save, appendonly, policy };
  } catch {
    return null;
  }
}

/**
 * Names at startup a Redis set up to lose the key records: persistence off (a restart comes back
 * empty) or an eviction policy that can drop keys without a TTL. Each is a warning line and
 * `gateway_store_data_at_risk{reason}` = 1. A Redis that refuses CONFIG GET (the gateway's own
 * ACL grants no CONFIG: CONFIG GET reads passwords too; managed services disable it) is reported
 * as unknown, not as refused. On Cluster every master is asked.
 */
export async function checkRedisDurability(
  redis: RedisClient,
  logger: Logger,
  gauge: Gauge<'reason'>,
): Promise<Set<DurabilityRisk>> {
  const cluster = (redis as { isCluster?: boolean }).isCluster === true;
  const nodes = cluster ? (redis as unknown as { nodes(role: string): RedisClient[] }).nodes('master') : [redis];
  const risks = new Set<DurabilityRisk>();
  for (const node of nodes) {
    const settings = await settingsOf(node);
    if (!settings) {
      risks.add('unknown');
      continue;
    }
    if (settings.save.trim() === '' && settings.appendonly === 'no') {
      risks.add('persistence_off');
      logger.warn(
        { redisSetting: { save: settings.save, appendonly: settings.appendonly } },
        'Redis persists nothing (save "" and appendonly no): a restart comes back empty and forgets every key record, window and ban. Key records are restored from DATA_DIR, but set appendonly yes (docs/redis.md).',
      );
    }
    if (!SAFE_POLICIES.has(settings.policy)) {
      risks.add('evicting_policy');
      logger.warn(
        { redisSetting: { 'maxmemory-policy': settings.policy } },
        `Redis maxmemory-policy ${settings.policy} can evict key records (they have no TTL) when memory runs out: set noeviction (docs/redis.md).`,
      );
    }
  }
  if (risks.has('unknown')) {
    logger.warn(
      'Redis refused CONFIG GET (an ACL or a managed service): whether it persists and how it evicts is unknown here; make sure it runs with appendonly yes and maxmemory-policy noeviction (docs/redis.md).',
    );
  }
  for (const reason of ['persistence_off', 'evicting_policy', 'unknown'] as const)
    gauge.set({ reason }, risks.has(reason) ? 1 : 0);
  return risks;
}
