import type { Request, Response } from 'express';
import type { Logger } from '../shared/logger';
import type { Clock } from '../shared/clock';
import type { AuditAction, AuditLog } from './audit-log';

/** Records one admin write: its log line and its entry in the shared trail. */
export type RecordAudit = (
  req: Request,
  action: AuditAction,
  keyId: string,
  details?: Record<string, unknown>,
) => Promise<void>;

/** Waits for a replica to hold the write; says on the answer and in the details whether one did. */
export type ConfirmWrite = (res: Response, details: Record<string, unknown>) => Promise<Record<string, unknown>>;

/**
 * The log line as before, and an entry in the shared trail. The write itself already happened, so a
 * trail that cannot be reached is logged as an error rather than failing the answer.
 */
export function createAuditTrail(
  auditLog: AuditLog,
  logger: Logger,
  clock: Clock,
  confirmWrite?: ConfirmWrite,
): RecordAudit {
  return async (req, action, keyId, details = {}) => {
    if (confirmWrite && req.res) details = await confirmWrite(req.res, details);
    logger.info({ audit: true, action, keyId, admin: req.socket.remoteAddress }, `admin ${action}`);
    const at = new Date(clock.now()).toISOString();
    try {
      await auditLog.append({ at, action, keyId, details });
    } catch (err) {
      logger.error({ err: (err as Error).message, action, keyId }, 'could not append to the audit trail');
    }
  };
}
