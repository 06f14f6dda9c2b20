/**
 * The configuration, by concern: fields.ts (kinds of setting), schema.ts (the one zod schema, which
 * is the type), environment.ts (variables and the settings they set), merge.ts, files.ts
 * (config/*.yaml and CONFIG_FILE), messages.ts (one line per bad setting), load.ts (the order).
 */
export {
  appEnvSchema,
  configSchema,
  type AppEnv,
  type Config,
  type CostConfig,
  type DeprecationConfig,
  type PlanConfig,
} from './schema';
export { ConfigError } from './errors';
export { envBindings } from './environment';
export { mergeConfig } from './merge';
export { loadConfig, type LoadConfigOptions } from './load';
export { loadConfigOffThread } from './load-off-thread';
export { MAX_CONFIG_FILE_BYTES } from './files';
export { redisConfigured, redisSourceCount, type RedisSources } from './redis-sources';
export { planReload, changedSettings, RELOADABLE_SETTINGS, type ReloadPlan } from './reload-plan';
export { configHash, redactedConfig, canonicalJson, SECRET_SETTINGS, REDACTED } from './display';
export { failedReload, problemEntry, type ConfigView, type LastReload, type ReloadOutcome } from './reload-outcome';
export {
  WEBHOOK_EVENT_TYPES,
  readWebhookSecret,
  webhookSecretBytes,
  type NotificationsConfig,
  type WebhookConfig,
  type WebhookEventType,
} from './notifications';
export { webhookTargetProblems, lookupHost, WEBHOOK_LOOKUP_TIMEOUT_MS, type HostLookup } from './webhook-targets';
export {
  USAGE_METERS,
  usagePeriodMs,
  readUsageSinkToken,
  type UsageEventsConfig,
  type UsageMeter,
} from './usage-events';
