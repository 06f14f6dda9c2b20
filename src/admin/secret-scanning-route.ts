import { createHash, verify } from 'node:crypto';
import express from 'express';
import { z } from 'zod';
import { ApiError } from '../shared/errors';
import type { Logger } from '../shared/logger';
import type { VerifyingKey } from '../shared/config/secret-scanning';

/** What a partner says of one token it found, besides the token. */
export interface LeakedKeyReport {
  type: string;
  url?: string;
  source?: string;
}

/** What the route needs to act on a report (src/product/key-revocations.ts). */
export interface LeakedKeyRevocation {
  /** True when `token` is (or was) one of this gateway's keys, which is then revoked if it still worked. */
  revokeReported(token: string, report: LeakedKeyReport): Promise<boolean>;
}

export interface SecretScanningDependencies {
  revocation: LeakedKeyRevocation;
  /** The partner's public keys in force (config `secretScanning`, reloadable); throws when its file cannot be read. */
  verifyingKeys(): readonly VerifyingKey[];
  logger: Logger;
}

export const SECRET_SCANNING_PATH = '/admin/secret-scanning';

/** A report's body at most: GitHub sends batches of found tokens, each well under 1 KiB. */
export const MAX_REPORT_BYTES = 1024 * 1024;
/** Tokens in one report at most. */
export const MAX_REPORTED_TOKENS = 1000;

const IDENTIFIER_HEADER = 'github-public-key-identifier';
const SIGNATURE_HEADER = 'github-public-key-signature';

const reportSchema = z
  .array(
    z.object({
      token: z.string().min(1).max(1000),
      type: z.string().max(200),
      url: z.string().max(2048).optional(),
      source: z.string().max(200).optional(),
    }),
  )
  .max(MAX_REPORTED_TOKENS);

const badSignature = (message: string) => new ApiError('invalid_api_key', message);

/**
 * The key named by the identifier header verifies the signature header (base64 of an ASN.1 DER
 * ECDSA P-256 SHA-256 signature) over the body's bytes exactly as received. Throws the 401.
 */
function checkSignature(req: express.Request, body: Buffer, keys: readonly VerifyingKey[]): void {
  const id = req.get(IDENTIFIER_HEADER);
  const signature = req.get(SIGNATURE_HEADER);
  if (!id || !signature)
    throw badSignature(
      'A secret-scanning report needs the Github-Public-Key-Identifier and Github-Public-Key-Signature headers.',
    );
  const key = keys.find((candidate) => candidate.id === id);
  if (!key) throw badSignature('Github-Public-Key-Identifier names no configured secret-scanning public key.');
  let valid = false;
  try {
    valid = verify('sha256', body, { key: key.key, dsaEncoding: 'der' }, Buffer.from(signature, 'base64'));
  } catch {
    // A signature that is not DER at all: as wrong as any other.
  }
  if (!valid) throw badSignature('Github-Public-Key-Signature does not verify the body with that key.');
}

function parseReport(body: Buffer): z.infer<typeof reportSchema> {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    throw new ApiError('invalid_json', 'The request body is not valid JSON.');
  }
  const parsed = reportSchema.safeParse(json);
  if (!parsed.success)
    throw new ApiError(
      'validation_failed',
      `The body must be a list of at most ${MAX_REPORTED_TOKENS} {token, type, url?, source?}.`,
    );
  return parsed.data;
}

/**
 * POST /admin/secret-scanning (CONTRACT §5): a secret-scanning partner (GitHub's program) posts the
 * tokens it found in public code. Not behind the admin token but behind the partner's signature,
 * checked before anything else; then each token that is one of our keys is revoked (idempotent:
 * the same report twice revokes nothing more), audited and announced. The answer says which were
 * real, as the partner program expects: `[{token_hash, token_type, label}]`.
 */
export function secretScanningRoute(deps: SecretScanningDependencies): express.Router {
  const router = express.Router();
  const raw = express.raw({ type: () => true, limit: MAX_REPORT_BYTES });
  router.post(SECRET_SCANNING_PATH, raw, async (req, res) => {
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    let keys: readonly VerifyingKey[];
    try {
      keys = deps.verifyingKeys();
    } catch (err) {
      deps.logger.error(
        { err: (err as Error).message },
        'secret-scanning public keys cannot be read: reports are refused until they can',
      );
      throw new ApiError('service_unavailable', 'The secret-scanning public keys cannot be read right now.', {
        'Retry-After': '60',
      });
    }
    checkSignature(req, body, keys);
    const report = parseReport(body);
    const answers = [];
    let real = 0;
    // One at a time: the same token twice in a report is revoked once, and a report of 1,000 never
    // holds the store with 1,000 revocations at once.
    for (const found of report) {
      const ours = await deps.revocation.revokeReported(found.token, {
        type: found.type,
        url: found.url,
        source: found.source,
      });
      if (ours) real++;
      answers.push({
        token_hash: createHash('sha256').update(found.token).digest('hex'),
        token_type: found.type,
        label: ours ? 'true_positive' : 'false_positive',
      });
    }
    deps.logger.info(
      { tokens: report.length, ours: real, keyIdentifier: req.get(IDENTIFIER_HEADER) },
      'secret-scanning report answered',
    );
    res.status(200).json(answers);
  });
  return router;
}
