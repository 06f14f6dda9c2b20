import express, { type Request, type Response } from 'express';
import { ApiError } from '../shared/errors';
import { ImportLineError, linesOf, NDJSON_CONTENT_TYPE } from '../keys/key-export';
import { KeyImportConflict, type ImportResult } from '../keys/types';
import type { AuditAction } from './audit-log';
import { send } from './streamed-response';

/** What backup and restore need from the key service. */
export interface KeyBackup {
  /** Every record's line, handed to `write` a batch at a time. */
  exportBackup(write: (text: string) => Promise<void>): Promise<void>;
  /** Throws ImportLineError (bad line) or KeyImportConflict (a secret held by another id); nothing imported then. */
  importBackup(lines: AsyncIterable<string>): Promise<ImportResult>;
}

/**
 * A backup is every key record, so it is far larger than any other admin body: 64 MiB holds some
 * 150,000 records (about 450 bytes a line). It is read as it arrives, never held whole.
 */
export const MAX_IMPORT_BYTES = 64 * 1024 * 1024;

/** Content types an import accepts: the export's own, JSON Lines, and plain text (curl --data-binary). */
const IMPORT_TYPES = [NDJSON_CONTENT_TYPE, 'application/jsonl', 'text/plain'];

/** The request body's chunks as they arrive, refused with 413 past MAX_IMPORT_BYTES. */
async function* bodyOf(req: Request): AsyncGenerator<Buffer> {
  let bytes = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > MAX_IMPORT_BYTES)
      throw new ApiError('payload_too_large', `An import is at most ${MAX_IMPORT_BYTES} bytes.`);
    yield chunk;
  }
}

/**
 * GET /admin/keys/export: NDJSON written batch by batch as the store reads the records (HSCAN on
 * Redis), so 100,000 keys are never one command nor one string. A failure before the first line
 * gets the Error body; after it the connection is cut, so a client never takes a short file for a
 * whole one.
 */
async function exportKeys(keys: KeyBackup, res: Response): Promise<void> {
  let started = false;
  try {
    await keys.exportBackup(async (text) => {
      if (!started) {
        started = true;
        res.setHeader('Content-Type', `${NDJSON_CONTENT_TYPE}; charset=utf-8`);
        res.setHeader('Content-Disposition', 'attachment; filename="keys.ndjson"');
      }
      if (!(await send(res, text))) throw new Error('the client went away');
    });
  } catch (err) {
    if (!started) throw err;
    res.destroy(err as Error);
    return;
  }
  if (!started) res.setHeader('Content-Type', `${NDJSON_CONTENT_TYPE}; charset=utf-8`);
  res.end();
}

/**
 * GET /admin/keys/export and POST /admin/keys/import (CONTRACT §5). Mounted on the authenticated
 * admin router before `/keys/:id`, which would otherwise take `export` for an id.
 */
export function keyBackupRoutes(
  keys: KeyBackup,
  audit: (req: Request, action: AuditAction, keyId: string, details: Record<string, unknown>) => Promise<void>,
): express.Router {
  const router = express.Router();

  router.get('/keys/export', (_req: Request, res: Response) => exportKeys(keys, res));

  router.post('/keys/import', async (req: Request, res: Response) => {
    if (!req.is(IMPORT_TYPES))
      throw new ApiError('unsupported_media_type', `Send the export's lines as ${NDJSON_CONTENT_TYPE}.`);
    let result: ImportResult;
    try {
      result = await keys.importBackup(linesOf(bodyOf(req)));
    } catch (err) {
      // Refused before the whole body arrived (a bad line, a line or a body too long): the rest is
      // never read, so the connection cannot carry another request; closed once the answer is out,
      // rather than held open (its reading stopped) until the client or a shutdown ends it.
      if (!req.complete) res.setHeader('Connection', 'close');
      if (err instanceof ImportLineError) throw new ApiError('validation_failed', `Nothing imported: ${err.message}.`);
      if (err instanceof KeyImportConflict) throw new ApiError('conflict', `Nothing imported: ${err.message}.`);
      throw err;
    }
    // The audit entry names every id the import created or changed (CONTRACT §4).
    await audit(req, 'import', '*', { imported: result.imported, unchanged: result.unchanged, ids: result.ids });
    res.json({ imported: result.imported, unchanged: result.unchanged });
  });
  return router;
}
