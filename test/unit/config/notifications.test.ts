import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, configHash, loadConfig, redactedConfig, REDACTED } from '../../../src/shared/config';

/** What a bad `notifications.webhooks` says: one line per problem, naming the setting, never the secret. */

const SECRET = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;

function refusal(webhooks: unknown[], server: Record<string, unknown> = {}): string[] {
  try {
    loadConfig({ env: {}, overrides: { notifications: { webhooks }, server } as never });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message.split('\n').filter((line) => line.includes('notifications'));
  }
  return [];
}

function secretFile(content: string): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-whsec-')), 'secret');
  fs.writeFileSync(file, content);
  return file;
}

test.each([
  [
    'a URL that is not one',
    { url: 'hooks.example', secret: SECRET },
    'invalid setting notifications.webhooks.0.url: must be an http:// or https:// URL',
  ],
  [
    'a non-HTTP scheme',
    { url: 'ftp://hooks.example/x', secret: SECRET },
    'invalid setting notifications.webhooks.0.url: must be an http:// or https:// URL',
  ],
  [
    'the admin listener',
    { url: 'http://127.0.0.1:8081/admin/keys', secret: SECRET },
    "invalid setting notifications.webhooks.0.url: points at this gateway's admin listener (127.0.0.1:8081); a receiver must be another service",
  ],
  [
    'the admin listener by name',
    { url: 'http://localhost:8081/', secret: SECRET },
    "invalid setting notifications.webhooks.0.url: points at this gateway's admin listener (127.0.0.1:8081); a receiver must be another service",
  ],
  // Issue 48 (item 7): loopback however it is written, and names under localhost.
  [
    'the admin listener as IPv4-mapped IPv6',
    { url: 'http://[::ffff:127.0.0.1]:8081/admin/reload', secret: SECRET },
    "invalid setting notifications.webhooks.0.url: points at this gateway's admin listener (127.0.0.1:8081); a receiver must be another service",
  ],
  [
    'the admin listener as IPv4-mapped IPv6 in hex',
    { url: 'http://[::ffff:7f00:1]:8081/admin/reload', secret: SECRET },
    "invalid setting notifications.webhooks.0.url: points at this gateway's admin listener (127.0.0.1:8081); a receiver must be another service",
  ],
  [
    'the admin listener as IPv4-compatible IPv6',
    { url: 'http://[::127.0.0.1]:8081/admin/reload', secret: SECRET },
    "invalid setting notifications.webhooks.0.url: points at this gateway's admin listener (127.0.0.1:8081); a receiver must be another service",
  ],
  [
    'the admin listener as a non-canonical ::1',
    { url: 'http://[0:0:0:0:0:0:0:1]:8081/admin/reload', secret: SECRET },
    "invalid setting notifications.webhooks.0.url: points at this gateway's admin listener (127.0.0.1:8081); a receiver must be another service",
  ],
  [
    'the admin listener as another loopback address in decimal',
    { url: 'http://2130706434:8081/admin/reload', secret: SECRET },
    "invalid setting notifications.webhooks.0.url: points at this gateway's admin listener (127.0.0.1:8081); a receiver must be another service",
  ],
  [
    'the admin listener by a name under localhost',
    { url: 'http://hooks.localhost:8081/admin/reload', secret: SECRET },
    "invalid setting notifications.webhooks.0.url: points at this gateway's admin listener (127.0.0.1:8081); a receiver must be another service",
  ],
  [
    'no secret',
    { url: 'https://hooks.example/x' },
    'invalid setting notifications.webhooks.0.secret: is required (or secretFile): must be whsec_ followed by the base64 of 24 to 64 random bytes, e.g. whsec_$(openssl rand -base64 32)',
  ],
  [
    'a secret without whsec_',
    { url: 'https://hooks.example/x', secret: 'hunter2hunter2hunter2hunter2' },
    'invalid setting notifications.webhooks.0.secret: must be whsec_ followed by the base64 of 24 to 64 random bytes, e.g. whsec_$(openssl rand -base64 32)',
  ],
  [
    'a secret too short',
    { url: 'https://hooks.example/x', secret: `whsec_${Buffer.alloc(8).toString('base64')}` },
    'invalid setting notifications.webhooks.0.secret: must be whsec_ followed by the base64 of 24 to 64 random bytes, e.g. whsec_$(openssl rand -base64 32)',
  ],
  [
    'both secret and secretFile',
    { url: 'https://hooks.example/x', secret: SECRET, secretFile: '/nope' },
    'invalid setting notifications.webhooks.0.secretFile: secret is set too; set one of them, not both',
  ],
  [
    'an unreadable secretFile',
    { url: 'https://hooks.example/x', secretFile: '/does/not/exist' },
    'invalid setting notifications.webhooks.0.secretFile: /does/not/exist cannot be read (ENOENT)',
  ],
  [
    'an unknown event',
    { url: 'https://hooks.example/x', secret: SECRET, events: ['key.created'] },
    'invalid setting notifications.webhooks.0.events.0: must be one of quota.threshold, key.banned, key.expiring, key.revoked',
  ],
  [
    'no event',
    { url: 'https://hooks.example/x', secret: SECRET, events: [] },
    'invalid setting notifications.webhooks.0.events: must list at least one event',
  ],
  [
    'an unknown field',
    { url: 'https://hooks.example/x', secret: SECRET, retries: 3 },
    'unknown setting notifications.webhooks.0.retries: config/default.yaml lists every setting',
  ],
])('%s: one line naming it', (_name, webhook, line) => {
  expect(refusal([webhook])).toEqual([line]);
});

test('a secret file that holds no whsec_ secret is named, never printed', () => {
  const file = secretFile('not-a-secret-at-all-but-long-enough\n');
  const lines = refusal([{ url: 'https://hooks.example/x', secretFile: file }]);
  expect(lines).toEqual([
    `invalid setting notifications.webhooks.0.secretFile: ${file} does not hold a secret that is whsec_ followed by the base64 of 24 to 64 random bytes, e.g. whsec_$(openssl rand -base64 32)`,
  ]);
  expect(lines.join('\n')).not.toContain('not-a-secret');
});

test('every bad receiver at once, one line each; the same receiver twice is named', () => {
  expect(
    refusal([
      { url: 'gopher://a', secret: SECRET },
      { url: 'https://hooks.example/x', secret: SECRET },
      { url: 'https://hooks.example/x', secret: 'whsec_' },
    ]),
  ).toEqual([
    'invalid setting notifications.webhooks.0.url: must be an http:// or https:// URL',
    'invalid setting notifications.webhooks.2.secret: must be whsec_ followed by the base64 of 24 to 64 random bytes, e.g. whsec_$(openssl rand -base64 32)',
    'invalid setting notifications.webhooks.2.url: is listed twice; give each receiver once, with all its events',
  ]);
});

test("an admin listener on every address: any of this machine's addresses on its port is refused", () => {
  expect(
    refusal([{ url: 'http://127.0.0.1:9000/hooks', secret: SECRET }], { adminHost: '0.0.0.0', adminPort: 9000 }),
  ).toEqual([
    "invalid setting notifications.webhooks.0.url: points at this gateway's admin listener (0.0.0.0:9000); a receiver must be another service",
  ]);
  // Another port of this machine is another service.
  expect(
    refusal([{ url: 'http://127.0.0.1:9001/hooks', secret: SECRET }], { adminHost: '0.0.0.0', adminPort: 9000 }),
  ).toEqual([]);
});

test('accepted: a secret, or a file holding one (trailing newline dropped); events default to all', () => {
  const config = loadConfig({
    env: {},
    overrides: {
      notifications: {
        webhooks: [
          { url: 'https://a.example/h', secret: SECRET },
          { url: 'https://user:pw@b.example/h', secretFile: secretFile(`${SECRET}\n`), events: ['key.banned'] },
        ],
      },
    } as never,
  });
  expect(config.notifications.webhooks).toHaveLength(2);
  // GET /admin/config: the secret and a password inside the URL are redacted; the file's path is not a secret.
  const shown = redactedConfig(config).notifications.webhooks;
  expect(shown[0]!.secret).toBe(REDACTED);
  expect(shown[1]!.url).not.toContain('pw');
  expect(shown[1]!.secretFile).toBe(config.notifications.webhooks[1]!.secretFile);
  expect(JSON.stringify(redactedConfig(config))).not.toContain(SECRET);
});

/** Issue 48 (item 12): a token in a receiver's URL path or query is a secret as its password is. */
test('GET /admin/config and the hash never take a token in the URL path or query: only the token changed, the hash stays', () => {
  const withUrl = (url: string) =>
    loadConfig({ env: {}, overrides: { notifications: { webhooks: [{ url, secret: SECRET }] } } as never });
  const config = withUrl('https://hooks.example/T0KEN/x?token=abc');
  const shown = JSON.stringify(redactedConfig(config));
  expect(shown).not.toContain('T0KEN');
  expect(shown).not.toContain('abc');
  expect(redactedConfig(config).notifications.webhooks[0]!.url).toBe(
    'https://hooks.example/[redacted]?token=[redacted]',
  );
  expect(configHash(withUrl('https://hooks.example/OTHER/y?token=xyz'))).toBe(configHash(config));
  // What is not secret still enters it: another receiver host, or another parameter name.
  expect(configHash(withUrl('https://other.example/T0KEN/x?token=abc'))).not.toBe(configHash(config));
  expect(configHash(withUrl('https://hooks.example/T0KEN/x?key=abc'))).not.toBe(configHash(config));
});
