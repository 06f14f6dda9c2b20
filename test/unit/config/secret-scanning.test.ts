import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generateKeyPairSync } from 'node:crypto';
import { ConfigError, loadConfig, planReload } from '../../../src/shared/config';
import { verifyingKeysOf } from '../../../src/shared/config/secret-scanning';

/** Config `secretScanning` (POST /admin/secret-scanning): what a bad key or file says at load, and a GitHub-format file read. */

const ecPem = () =>
  generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey.export({ type: 'spki', format: 'pem' }) as string;
const otherCurvePem = () =>
  generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).publicKey.export({ type: 'spki', format: 'pem' }) as string;
const rsaPem = () =>
  generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }) as string;

function refusal(secretScanning: Record<string, unknown>): string[] {
  try {
    loadConfig({ env: {}, overrides: { secretScanning } as never });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message.split('\n').filter((line) => line.includes('secretScanning'));
  }
  return [];
}

function file(content: string): string {
  const at = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'asg-scanning-')), 'keys.json');
  fs.writeFileSync(at, content);
  return at;
}

const PEM_MESSAGE = 'must be an ECDSA P-256 public key in PEM (-----BEGIN PUBLIC KEY-----)';

test.each([
  [
    'not PEM at all',
    { publicKeys: [{ id: 'a', pem: 'hello' }] },
    [`invalid setting secretScanning.publicKeys.0.pem: ${PEM_MESSAGE}`],
  ],
  [
    'an RSA key',
    { publicKeys: [{ id: 'a', pem: rsaPem() }] },
    [`invalid setting secretScanning.publicKeys.0.pem: ${PEM_MESSAGE}`],
  ],
  [
    'a P-384 key',
    {
      publicKeys: [
        { id: 'a', pem: ecPem() },
        { id: 'b', pem: otherCurvePem() },
      ],
    },
    [`invalid setting secretScanning.publicKeys.1.pem: ${PEM_MESSAGE}`],
  ],
  [
    'a file that is not there',
    { publicKeysFile: '/nonexistent/keys.json' },
    ['invalid setting secretScanning.publicKeysFile: /nonexistent/keys.json cannot be read (ENOENT)'],
  ],
])('%s is refused at load, naming the setting', (_label, secretScanning, expected) => {
  expect(refusal(secretScanning)).toEqual(expected);
});

test('a file of another shape is refused at load', () => {
  const at = file(JSON.stringify({ keys: [] }));
  expect(refusal({ publicKeysFile: at })).toEqual([
    `invalid setting secretScanning.publicKeysFile: ${at} must be {"public_keys": [{"key_identifier", "key"}]}`,
  ]);
});

test('the default has no keys, and loads', () => {
  const config = loadConfig({ env: {} });
  expect(config.secretScanning).toEqual({ publicKeys: [], publicKeysFile: null });
  expect(verifyingKeysOf(config.secretScanning)).toEqual([]);
});

test("inline keys and a file in GitHub's format (read again at each use) are all verifying keys", () => {
  const inline = ecPem();
  const at = file(JSON.stringify({ public_keys: [{ key_identifier: 'gh-1', key: ecPem(), is_current: true }] }));
  const config = loadConfig({
    env: {},
    overrides: { secretScanning: { publicKeys: [{ id: 'inline', pem: inline }], publicKeysFile: at } } as never,
  });
  expect(verifyingKeysOf(config.secretScanning).map((k) => k.id)).toEqual(['inline', 'gh-1']);
  // GitHub adds a key: rewriting the file is enough.
  fs.writeFileSync(
    at,
    JSON.stringify({
      public_keys: [
        { key_identifier: 'gh-1', key: ecPem() },
        { key_identifier: 'gh-2', key: ecPem() },
      ],
    }),
  );
  expect(verifyingKeysOf(config.secretScanning).map((k) => k.id)).toEqual(['inline', 'gh-1', 'gh-2']);
});

test('secretScanning is reloadable: a new key is taken over without a restart', () => {
  const current = loadConfig({ env: {} });
  const next = loadConfig({
    env: {},
    overrides: { secretScanning: { publicKeys: [{ id: 'new', pem: ecPem() }] } } as never,
  });
  const plan = planReload(current, next);
  expect(plan.restartNeeded).toEqual([]);
  expect(plan.applied).toEqual(['secretScanning']);
  expect(plan.inForce.secretScanning.publicKeys.map((k) => k.id)).toEqual(['new']);
});
