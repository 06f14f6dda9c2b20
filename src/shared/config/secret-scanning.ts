import { createPublicKey, type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import { z } from 'zod';

/**
 * Config `secretScanning` (CONTRACT §5, POST /admin/secret-scanning): the public keys a
 * secret-scanning partner (GitHub's program) signs its reports with. Inline (`publicKeys`), or a
 * file in the format GitHub serves at https://api.github.com/meta/public_keys/secret_scanning
 * (`publicKeysFile`), read again at each report so that a key GitHub adds reaches the gateway by
 * rewriting the file. Reloadable.
 */

/** An ECDSA P-256 public key in PEM, as GitHub publishes them; anything else is refused at load. */
export function ecdsaP256PublicKey(pem: string): KeyObject {
  const key = createPublicKey(pem);
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1')
    throw new Error('not an ECDSA P-256 public key');
  return key;
}

const publicKeySchema = z.strictObject({
  /** What the partner sends in `Github-Public-Key-Identifier`. */
  id: z.string().min(1).max(512),
  pem: z.string().min(1).max(4096),
});

export const secretScanningSchema = z.strictObject({
  publicKeys: z.array(publicKeySchema).max(100),
  /** A JSON file `{public_keys: [{key_identifier, key}]}` (GitHub's own answer); null: none. */
  publicKeysFile: z.string().min(1).nullable(),
});
export type SecretScanningConfig = z.infer<typeof secretScanningSchema>;

export interface VerifyingKey {
  id: string;
  key: KeyObject;
}

const fileSchema = z.object({
  public_keys: z
    .array(z.object({ key_identifier: z.string().min(1).max(512), key: z.string().min(1).max(4096) }))
    .max(100),
});

/** The keys of a `publicKeysFile`; throws with a message naming what is wrong. */
export function readPublicKeysFile(file: string): VerifyingKey[] {
  const parsed = fileSchema.safeParse(JSON.parse(fs.readFileSync(file, 'utf8')));
  if (!parsed.success) throw new Error('must be {"public_keys": [{"key_identifier", "key"}]}');
  return parsed.data.public_keys.map((entry) => ({ id: entry.key_identifier, key: ecdsaP256PublicKey(entry.key) }));
}

/** Every key the config names, inline and from its file; throws when one cannot be read. */
export function verifyingKeysOf(config: SecretScanningConfig): VerifyingKey[] {
  const inline = config.publicKeys.map((entry) => ({ id: entry.id, key: ecdsaP256PublicKey(entry.pem) }));
  return config.publicKeysFile ? [...inline, ...readPublicKeysFile(config.publicKeysFile)] : inline;
}

type Issue = { path: (string | number)[]; message: string };

/** One issue per key that is not an ECDSA P-256 public key, and for a file that cannot be read. */
export function secretScanningIssues(config: SecretScanningConfig): Issue[] {
  const issues: Issue[] = [];
  for (const [i, entry] of config.publicKeys.entries()) {
    try {
      ecdsaP256PublicKey(entry.pem);
    } catch {
      issues.push({
        path: ['secretScanning', 'publicKeys', i, 'pem'],
        message: 'must be an ECDSA P-256 public key in PEM (-----BEGIN PUBLIC KEY-----)',
      });
    }
  }
  if (config.publicKeysFile) {
    try {
      readPublicKeysFile(config.publicKeysFile);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      issues.push({
        path: ['secretScanning', 'publicKeysFile'],
        message: `${config.publicKeysFile} ${code ? `cannot be read (${code})` : (err as Error).message}`,
      });
    }
  }
  return issues;
}
