import path from 'node:path';
import { withSecretFiles } from '../secret-files';
import { appEnvSchema, configSchema, type Config } from './schema';
import { ConfigError } from './errors';
import { envBindings, settingKey, settingName } from './environment';
import { mergeConfig, setPath, type JsonObject } from './merge';
import { findConfigFile, readConfigFile } from './files';
import { describeIssue } from './messages';

export interface LoadConfigOptions {
  env?: NodeJS.ProcessEnv;
  configDir?: string;
  /** Applied last, after the environment: how tests and embedded runs adjust a setting. */
  overrides?: JsonObject;
  /** The inventory alone needs no admin token; the gateway (default) does outside development. */
  role?: 'gateway' | 'inventory';
}

/**
 * default → APP_ENV file → CONFIG_FILE → environment variables → overrides, then one zod parse.
 * Throws ConfigError naming every bad setting, one line each, so that an operator fixes them all
 * in one go rather than meeting them one restart at a time.
 */
export function loadConfig(options: LoadConfigOptions = {}): Config {
  const problems: string[] = [];
  const env = withSecretFiles(options.env ?? process.env, problems);
  const configDir = options.configDir ?? path.resolve(__dirname, '..', '..', '..', 'config');
  const appEnv = appEnvSchema.safeParse(env.APP_ENV ?? 'development');
  if (!appEnv.success)
    problems.push(`invalid setting APP_ENV: must be development, staging or production (got "${env.APP_ENV}")`);

  const defaultFile = findConfigFile(configDir, 'default');
  if (!defaultFile) throw new ConfigError(`config/default.yaml not found in ${configDir}`);
  let raw = readConfigFile(defaultFile, 'config file', problems) ?? {};
  // With APP_ENV unknown there is no environment file to read; the rest is still checked.
  const envFile = appEnv.success ? findConfigFile(configDir, appEnv.data) : null;
  if (envFile) raw = mergeConfig(raw, readConfigFile(envFile, 'config file', problems) ?? {});
  if (env.CONFIG_FILE)
    raw = mergeConfig(
      raw,
      readConfigFile(path.resolve(env.CONFIG_FILE), 'invalid setting CONFIG_FILE:', problems) ?? {},
    );

  const fromEnv: JsonObject = {};
  for (const binding of envBindings) {
    const value = env[binding.variable];
    if (value === undefined || value === '') continue;
    setPath(
      fromEnv,
      binding.path,
      binding.list
        ? value
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : value,
    );
  }
  raw = mergeConfig(raw, fromEnv);
  if (options.overrides) raw = mergeConfig(raw, options.overrides);

  const result = configSchema.safeParse(appEnv.success ? raw : { ...raw, env: 'development' });
  if (!result.success) {
    const named = new Set<string>();
    for (const issue of result.error.issues) {
      const setting =
        issue.code === 'unrecognized_keys' ? `${settingKey(issue.path)}.${issue.keys[0]}` : settingKey(issue.path);
      if (named.has(setting)) continue;
      named.add(setting);
      problems.push(describeIssue(issue));
    }
  }
  if (appEnv.success && (options.role ?? 'gateway') === 'gateway' && appEnv.data !== 'development') {
    const token = (raw.admin as JsonObject | undefined)?.token;
    if (typeof token !== 'string' || token.length < 32) {
      problems.push(
        `invalid setting ${settingName(['admin', 'token'])}: is required in ${appEnv.data} and must be at least 32 characters`,
      );
    }
  }
  if (problems.length > 0 || !result.success) throw new ConfigError(problems);
  return result.data;
}
