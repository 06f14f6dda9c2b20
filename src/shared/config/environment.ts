/** Environment variables and the config path each one sets (CONTRACT §2). */
export const envBindings: ReadonlyArray<{ variable: string; path: string[]; list?: boolean }> = [
  { variable: 'APP_ENV', path: ['env'] },
  { variable: 'HOST', path: ['server', 'host'] },
  { variable: 'ADMIN_HOST', path: ['server', 'adminHost'] },
  { variable: 'PORT', path: ['server', 'port'] },
  { variable: 'ADMIN_PORT', path: ['server', 'adminPort'] },
  { variable: 'AUTHZ_PORT', path: ['server', 'authzPort'] },
  { variable: 'AUTHZ_HOST', path: ['server', 'authzHost'] },
  { variable: 'PUBLIC_BASE_URL', path: ['server', 'publicBaseUrl'] },
  { variable: 'INVENTORY_PORT', path: ['inventory', 'port'] },
  { variable: 'INVENTORY_URL', path: ['upstream', 'url'] },
  { variable: 'REDIS_URL', path: ['redis', 'url'] },
  { variable: 'REDIS_CLUSTER_NODES', path: ['redis', 'clusterNodes'], list: true },
  { variable: 'REDIS_PASSWORD', path: ['redis', 'password'] },
  { variable: 'REDIS_USERNAME', path: ['redis', 'username'] },
  { variable: 'REDIS_SENTINELS', path: ['redis', 'sentinels'], list: true },
  { variable: 'REDIS_SENTINEL_NAME', path: ['redis', 'sentinelName'] },
  { variable: 'REDIS_SENTINEL_PASSWORD', path: ['redis', 'sentinelPassword'] },
  { variable: 'REDIS_TLS_CA_FILE', path: ['redis', 'tls', 'caFile'] },
  { variable: 'REDIS_TLS_CERT_FILE', path: ['redis', 'tls', 'certFile'] },
  { variable: 'REDIS_TLS_KEY_FILE', path: ['redis', 'tls', 'keyFile'] },
  { variable: 'TLS_CERT_FILE', path: ['tls', 'certFile'] },
  { variable: 'TLS_KEY_FILE', path: ['tls', 'keyFile'] },
  { variable: 'ADMIN_TOKEN', path: ['admin', 'token'] },
  { variable: 'SIGNING_SECRET', path: ['signing', 'secret'] },
  { variable: 'SIGNING_PREVIOUS_SECRETS', path: ['signing', 'previousSecrets'], list: true },
  { variable: 'STORE_FAIL_MODE', path: ['store', 'failMode'] },
  { variable: 'RATE_LIMIT_MINUTE_WINDOW', path: ['rateLimit', 'minuteWindow'] },
  { variable: 'RATE_LIMIT_RETRY_AFTER_JITTER_SECONDS', path: ['rateLimit', 'retryAfterJitterSeconds'] },
  { variable: 'SHUTDOWN_TIMEOUT_MS', path: ['server', 'shutdownTimeoutMs'] },
  { variable: 'DATA_DIR', path: ['dataDir'] },
  { variable: 'SQLITE_BUSY_TIMEOUT_MS', path: ['storage', 'busyTimeoutMs'] },
  { variable: 'LOG_LEVEL', path: ['logLevel'] },
  { variable: 'WORKERS', path: ['workers'] },
];

function bindingOf(dotted: string) {
  return envBindings.find((b) => dotted === b.path.join('.') || dotted.startsWith(b.path.join('.') + '.'));
}

/** `PORT (server.port)`: the variable and the config path, either of which may have set it. */
export function settingName(issuePath: PropertyKey[]): string {
  const dotted = issuePath.map(String).join('.');
  const binding = bindingOf(dotted);
  return binding ? `${binding.variable} (${dotted})` : dotted || '(root)';
}

/** What one line stands for: a variable (all of a list's entries are one setting) or a config path. */
export function settingKey(issuePath: PropertyKey[]): string {
  const dotted = issuePath.map(String).join('.');
  return bindingOf(dotted)?.variable ?? dotted;
}
