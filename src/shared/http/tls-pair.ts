import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import type { Config } from '../config';
import { ConfigError } from '../config/errors';

/** A certificate chain and its private key, as read from TLS_CERT_FILE and TLS_KEY_FILE. */
export interface TlsPair {
  cert: Buffer;
  key: Buffer;
  /** SHA-256 fingerprint of the leaf certificate: what the log and the reload's answer name. */
  fingerprint: string;
  /** When the leaf certificate expires (ISO 8601). */
  validTo: string;
}

const CERT_SETTING = 'TLS_CERT_FILE (tls.certFile)';
const KEY_SETTING = 'TLS_KEY_FILE (tls.keyFile)';

async function readSetting(file: string, setting: string): Promise<Buffer> {
  try {
    return await fs.readFile(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new ConfigError(`invalid setting ${setting}: ${file} cannot be read (${code})`);
  }
}

/**
 * Reads and checks the pair: the certificate parses, the key parses, and the key is the
 * certificate's. Anything else is one line naming the setting (ConfigError), never a stack trace,
 * so that startup stops with it and a reload refuses the pair and keeps the one in force.
 */
export async function readTlsPair(settings: Config['tls']): Promise<TlsPair | null> {
  if (settings.certFile === null || settings.keyFile === null) return null;
  const [cert, key] = await Promise.all([
    readSetting(settings.certFile, CERT_SETTING),
    readSetting(settings.keyFile, KEY_SETTING),
  ]);
  let leaf: crypto.X509Certificate;
  try {
    leaf = new crypto.X509Certificate(cert);
  } catch {
    throw new ConfigError(`invalid setting ${CERT_SETTING}: ${settings.certFile} holds no PEM certificate`);
  }
  let privateKey: crypto.KeyObject;
  try {
    privateKey = crypto.createPrivateKey(key);
  } catch {
    throw new ConfigError(`invalid setting ${KEY_SETTING}: ${settings.keyFile} holds no unencrypted PEM private key`);
  }
  if (!leaf.checkPrivateKey(privateKey)) {
    throw new ConfigError(
      `invalid setting ${KEY_SETTING}: ${settings.keyFile} is not the key of the certificate in ${settings.certFile}`,
    );
  }
  return { cert, key, fingerprint: leaf.fingerprint256, validTo: new Date(leaf.validTo).toISOString() };
}
