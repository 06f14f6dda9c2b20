import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../shared/config';

/** In development the admin token is generated once and kept under dataDir, like the signing secret. */
export function resolveAdminToken(config: Config): string {
  if (config.admin.token) return config.admin.token;
  const file = path.join(config.dataDir, 'admin-token');
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    fs.mkdirSync(config.dataDir, { recursive: true });
    const token = randomBytes(32).toString('base64url');
    fs.writeFileSync(file, token + '\n', { mode: 0o600 });
    return token;
  }
}
