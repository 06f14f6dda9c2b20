import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../../src/shared/config';

/** `<NAME>_FILE` (CONTRACT §2): secrets read from files, as Docker and Kubernetes secrets hand them over. */

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-secrets-'));
function secretFile(name: string, content: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, content);
  return file;
}

function problemsOf(env: Record<string, string>): readonly string[] {
  try {
    loadConfig({ env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('the configuration was accepted');
}

const production = { APP_ENV: 'production' };

describe('secrets from files', () => {
  test('each secret is read from its file, one trailing newline dropped', () => {
    const config = loadConfig({
      env: {
        ...production,
        ADMIN_TOKEN_FILE: secretFile('admin-token', `${'a'.repeat(40)}\n`),
        SIGNING_SECRET_FILE: secretFile('signing-secret', `${'s'.repeat(40)}\r\n`),
        SIGNING_PREVIOUS_SECRETS_FILE: secretFile('previous', `${'p'.repeat(32)},${'q'.repeat(32)}\n`),
        REDIS_URL: 'redis://gateway@redis.internal:6379/0',
        REDIS_PASSWORD_FILE: secretFile('redis-password', 'pass word with spaces \n'),
      },
    });
    expect(config.admin.token).toBe('a'.repeat(40));
    expect(config.signing.secret).toBe('s'.repeat(40));
    expect(config.signing.previousSecrets).toEqual(['p'.repeat(32), 'q'.repeat(32)]);
    expect(config.redis.password).toBe('pass word with spaces ');
  });

  test('only the last newline goes: a secret may end with a space or hold inner newlines', () => {
    const config = loadConfig({ env: { ADMIN_TOKEN_FILE: secretFile('two-lines', 'first\nsecond\n\n') } });
    expect(config.admin.token).toBe('first\nsecond\n');
  });

  test('both NAME and NAME_FILE set: refused, naming the variable', () => {
    expect(problemsOf({ ADMIN_TOKEN: 'x'.repeat(40), ADMIN_TOKEN_FILE: secretFile('both', 'y'.repeat(40)) })).toEqual([
      'invalid setting ADMIN_TOKEN_FILE: ADMIN_TOKEN is set too; set one of them, not both',
    ]);
  });

  test('a missing, unreadable or empty file: one line each, all of them at once, never the secret', () => {
    const problems = problemsOf({
      ADMIN_TOKEN_FILE: path.join(dir, 'no-such-file'),
      SIGNING_SECRET_FILE: dir,
      REDIS_PASSWORD_FILE: secretFile('empty', '\n'),
    });
    expect(problems).toEqual([
      `invalid setting ADMIN_TOKEN_FILE: ${path.join(dir, 'no-such-file')} does not exist`,
      `invalid setting SIGNING_SECRET_FILE: ${dir} is a directory`,
      `invalid setting REDIS_PASSWORD_FILE: ${path.join(dir, 'empty')} is empty`,
    ]);
  });

  test('a secret from a file is checked like one from the environment', () => {
    const problems = problemsOf({
      ...production,
      ADMIN_TOKEN_FILE: secretFile('short', 'short\n'),
      SIGNING_SECRET: 's'.repeat(40),
    });
    expect(problems).toEqual([
      expect.stringMatching(
        /^invalid setting ADMIN_TOKEN \(admin\.token\): is required in production and must be at least 32 characters$/,
      ),
    ]);
    expect(problems.join('\n')).not.toContain('short\n');
  });

  test('a password in REDIS_URL and in REDIS_PASSWORD: refused', () => {
    expect(problemsOf({ REDIS_URL: 'redis://gw:secret@127.0.0.1:6379', REDIS_PASSWORD: 'other' })).toEqual([
      expect.stringMatching(
        /^invalid setting REDIS_PASSWORD \(redis\.password\): REDIS_URL holds a password too; give it in one place$/,
      ),
    ]);
  });

  test('a user in REDIS_URL and in REDIS_USERNAME: refused; a user name with a space or "@": refused', () => {
    expect(problemsOf({ REDIS_URL: 'redis://gw@127.0.0.1:6379', REDIS_USERNAME: 'other' })).toEqual([
      expect.stringMatching(
        /^invalid setting REDIS_USERNAME \(redis\.username\): REDIS_URL names a user too; give it in one place$/,
      ),
    ]);
    expect(problemsOf({ REDIS_CLUSTER_NODES: '127.0.0.1:7000', REDIS_USERNAME: 'a user@x' })).toEqual([
      expect.stringMatching(/^invalid setting REDIS_USERNAME \(redis\.username\): must be an ACL user name/),
    ]);
    expect(
      loadConfig({ env: { REDIS_CLUSTER_NODES: '127.0.0.1:7000', REDIS_USERNAME: 'asg-prod' } }).redis.username,
    ).toBe('asg-prod');
  });
});
