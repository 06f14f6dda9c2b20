import type { RedisClient } from '../shared/redis';
import { MemoryKeyStore, type MemoryKeyStoreOptions } from './memory-key-store';
import { RedisKeyStore } from './redis-key-store';
import type { KeyStore } from './types';

export * from './types';
export * from './key-format';
export { withoutHash, type PublicKeyRecord } from './record';
export { MemoryKeyStore, KEYS_DATABASE_FILE, type MemoryKeyStoreOptions } from './memory-key-store';
export { RedisKeyStore, redisKeyLayout, type RedisKeyStoreOptions } from './redis-key-store';
export { keyStatusAt } from './key-status';
export { KeyService, DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS, effectiveLimits, planLimitsOf, MAX_NAME_LENGTH, type CreatedKey, type KeyServiceOptions, type Plans } from './key-service';
export { KeyResolver, DEFAULT_MAX_CACHE_ENTRIES, type KeyResolution, type KeyResolverOptions } from './key-resolver';

export interface KeyStoreSettings {
  /** A connected client (see connectRedis); null selects the in-process store. */
  redis: RedisClient | null;
  /** Config `redis.namespace`. */
  namespace: string;
  /** Config `dataDir`: where the in-process store keeps `keys.sqlite`. */
  dataDir: string;
  /** For the in-process store: config `storage.busyTimeoutMs` and the failed-statement counter. */
  sqlite?: Pick<MemoryKeyStoreOptions, 'busyTimeoutMs' | 'onSqliteError'>;
}

/**
 * The key store for this process: Redis when a client is given (subscribed to changes by the time
 * this resolves), else the in-process store persisted under `dataDir`. The caller closes it; the
 * Redis client itself stays the caller's.
 */
export async function createKeyStore(settings: KeyStoreSettings): Promise<KeyStore> {
  if (settings.redis) return RedisKeyStore.open(settings.redis, { namespace: settings.namespace });
  return new MemoryKeyStore({ dataDir: settings.dataDir, ...settings.sqlite });
}
