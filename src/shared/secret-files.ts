import fs from 'node:fs';

/** Secrets that may come from a file (`<NAME>_FILE`) as Docker and Kubernetes hand them over (CONTRACT §2). */
export const SECRET_VARIABLES = [
  'ADMIN_TOKEN',
  'SIGNING_SECRET',
  'SIGNING_PREVIOUS_SECRETS',
  'REDIS_PASSWORD',
  'REDIS_SENTINEL_PASSWORD',
] as const;

const readFailures: Record<string, string> = {
  ENOENT: 'does not exist',
  EACCES: 'cannot be read (permission denied)',
  EISDIR: 'is a directory',
};

/**
 * The environment with each `<NAME>_FILE` read into `<NAME>`, once, at startup. One trailing
 * newline is dropped (what `echo` and most editors leave); anything else in the file is the secret.
 * A problem (both forms set, a file that cannot be read, an empty one) is one line each in
 * `problems`, naming the variable and never the secret.
 */
export function withSecretFiles(env: NodeJS.ProcessEnv, problems: string[]): NodeJS.ProcessEnv {
  let resolved: NodeJS.ProcessEnv | null = null;
  for (const name of SECRET_VARIABLES) {
    const file = env[`${name}_FILE`];
    if (file === undefined || file === '') continue;
    resolved ??= { ...env };
    if (env[name] !== undefined && env[name] !== '') {
      problems.push(`invalid setting ${name}_FILE: ${name} is set too; set one of them, not both`);
      continue;
    }
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      problems.push(`invalid setting ${name}_FILE: ${file} ${readFailures[code] ?? `cannot be read (${code})`}`);
      continue;
    }
    const secret = text.replace(/\r?\n$/, '');
    if (secret === '') {
      problems.push(`invalid setting ${name}_FILE: ${file} is empty`);
      continue;
    }
    resolved[name] = secret;
  }
  return resolved ?? env;
}
