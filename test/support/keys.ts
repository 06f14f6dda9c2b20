import type { KeyService } from '../../src/keys/key-service';
import type { NewKeyInput } from '../../src/keys/types';
import type { WindowLimits } from '../../src/limits/types';

/** An admin listener and its token: a product harness, a spawned process, another instance. */
export interface AdminEndpoint {
  adminUrl: string;
  adminToken: string;
}

/** What POST /admin/keys answers with 201 (the only place the full key appears). */
export interface CreatedKeyBody {
  id: string;
  key: string;
  name: string;
  plan: string;
  limits: { perMinute: number; perDay: number };
  createdAt: string;
  expiresAt?: string | null;
  billingDay?: number | null;
}

/** A created key: its 201 body and the Authorization header value that carries it. */
export interface CreatedKey extends CreatedKeyBody {
  auth: string;
  /** The whole answer, for the fields a test asks about beyond these (expiresAt, billingDay, …). */
  body: Record<string, unknown>;
}

/** What a key is created with; a name and the free plan unless given. */
export interface KeyInput {
  name?: string;
  plan?: string;
  limits?: WindowLimits | null;
  [field: string]: unknown;
}

/**
 * The test kit's one way to create a key. Given a product harness (which holds its key service),
 * the key is made through that service, in process: for tests about the gateway, not about the
 * admin API. Given only an admin endpoint, or `overApi: true`, it is POST /admin/keys over real
 * HTTP, expecting 201 (a refusal fails with the answer's body).
 */
export async function createKey(
  target: AdminEndpoint & { keyService?: KeyService },
  input: KeyInput = {},
  options: { overApi?: boolean } = {},
): Promise<CreatedKey> {
  const body = { name: 'test key', plan: 'free', ...input };
  if (target.keyService && !options.overApi) {
    const { key, record } = await target.keyService.create(body as NewKeyInput);
    const created = { ...record, key } as unknown as CreatedKeyBody;
    return { ...created, auth: `Bearer ${key}`, body: created as unknown as Record<string, unknown> };
  }
  const res = await fetch(`${target.adminUrl}/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${target.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 201) throw new Error(`POST /admin/keys answered ${res.status}: ${text}`);
  const created = JSON.parse(text) as CreatedKeyBody & Record<string, unknown>;
  return { ...created, auth: `Bearer ${created.key}`, body: created };
}
