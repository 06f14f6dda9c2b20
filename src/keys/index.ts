/** The keys part as the others use it; what opens and starts its stores is in src/product. */
export * from './types';
export * from './key-format';
export { ImportLineError, NDJSON_CONTENT_TYPE, parseExport, exportLine } from './key-export';
export { withoutHash, type PublicKeyRecord } from './record-changes';
export { SqliteKeyStore, KEYS_DATABASE_FILE, type SqliteKeyStoreOptions } from './stores/sqlite-key-store';
export { RedisKeyStore, redisKeyLayout, type RedisKeyStoreOptions } from './stores/redis-key-store';
export { keyStatusAt } from './key-status';
export {
  KeyService,
  DEFAULT_GRACE_SECONDS,
  MAX_GRACE_SECONDS,
  MAX_NAME_LENGTH,
  type CreatedKey,
  type KeyServiceOptions,
} from './key-service';
export { createKeyDurabilityMetrics, type KeyDurabilityMetrics } from './durability/key-durability-metrics';
export { KeyResolver, DEFAULT_MAX_CACHE_ENTRIES, type KeyResolution, type KeyResolverOptions } from './key-resolver';
export { keysAsPlanUsers, countPlanUse, type PlanUse, type PlanUsers } from './plan-users';
