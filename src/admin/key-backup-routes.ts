import express, { type Request, type Response } from 'express';
import { ApiError } from '../shared/errors';
import { ImportLineError, NDJSON_CONTENT_TYPE } from '../keys/key-export';
import { KeyImportConflict, type ImportResult } from '../keys/types';
import type { AuditAction } from './audit-log';

/** What backup and restore need from the key service. */
export interface KeyBackup {
  exportLines(): Promise<string[]>;
  /** Throws ImportLineError (bad line) or KeyImportConflict (a secret held by another id); nothing imported then. */
  importBackup(body: string): Promise<ImportResult>;
}

/**
 * A backup is every key record, so it is far larger than any other admin body: 64 MiB holds some
 * 150,000 records (about 450 bytes a line).
 */
export const MAX_IMPORT_BYTES = 64 * 1024 * 1024;

/** Content types an import accepts: the export's own, JSON Lines, and plain text (curl --data-binary). */
const IMPORT_TYPES = [NDJSON_CONTENT_TYPE, 'application/jsonl', 'text/plain'];

/**
 * GET /admin/keys/export and POST /admin/keys/import (CONTRACT §5). Mounted on the authenticated
 * admin router before `/keys/:id`, which would otherwise take `export` for an id.
 */
export function keyBackupRoutes(keys: KeyBackup, audit: (req: Request, action: AuditAction, keyId: string, details: Record<string, unknown>) => Promise<void>): express.Router {
  const router = express.Router();
  const text = express.text({ type: () => true, limit: MAX_IMPORT_BYTES });

  router.get('/keys/export', async (_req: Request, res: Response) => {
    const lines = await keys.exportLines();
    res.setHeader('Content-Type', `${NDJSON_CONTENT_TYPE}; charset=utf-8`);
    res.setHeader('Content-Disposition', 'attachment; filename="keys.ndjson"');
    res.send(lines.map((line) => line + '\n').join(''));
  });

  router.post('/keys/import', (req, _res, next) => {
    if (!req.is(IMPORT_TYPES)) throw new ApiError('unsupported_media_type', `Send the export's lines as ${NDJSON_CONTENT_TYPE}.`);
    next();
  }, text, async (req: Request, res: Response) => {
    const body = typeof req.body === 'string' ? req.body : '';
    let result: ImportResult;
    try {
      result = await keys.importBackup(body);
    } catch (err) {
      if (err instanceof ImportLineError) throw new ApiError('validation_failed', `Nothing imported: ${err.message}.`);
      if (err instanceof KeyImportConflict) throw new ApiError('conflict', `Nothing imported: ${err.message}.`);
      throw err;
    }
    await audit(req, 'import', '*', { ...result });
    res.json(result);
  });
  return router;
}
