import type { AuditLog } from '../admin/audit-log';
import type { LeakedKeyReport } from '../admin/secret-scanning-route';
import { failsChecksum, hashApiKey, isWellFormedKey } from '../keys/key-format';
import type { ApiKeyRecord } from '../keys/types';
import type { RevokedBy } from '../notifications/events';
import type { Clock } from '../shared/clock';
import type { Logger } from '../shared/logger';

export interface KeyRevocationsDependencies {
  /** This environment's key prefix: a reported token without it is not one of ours. */
  prefix: string;
  /** The key service's revocation: revoking again keeps the first `revokedAt`. */
  revoke(id: string): Promise<ApiKeyRecord | null>;
  /** The key store's lookup by secret hash (current or previous secret). */
  findByHash(hash: string): Promise<ApiKeyRecord | null>;
  /** The shared audit trail the admin API writes and GET /admin/audit reads. */
  auditLog: AuditLog;
  /** The `key.revoked` webhook (Notifier.keyRevoked). */
  announce(record: ApiKeyRecord, by: RevokedBy): void;
  clock: Clock;
  logger: Logger;
}

/**
 * Revocations that do not come through the admin API (CONTRACT §4, §5): a key revoking itself on
 * the public listener (POST /v1/keys/revoke) and keys a secret-scanning partner reports
 * (POST /admin/secret-scanning). Each is the key service's revocation, an entry in the audit trail
 * whose details say who (`by`), and a `key.revoked` webhook. Put together here so that neither the
 * request path nor the admin API reaches into the other.
 */
export class KeyRevocations {
  constructor(private readonly deps: KeyRevocationsDependencies) {}

  /** The caller's own key, which it presented (so it was usable a moment ago). */
  async revokeOwn(record: ApiKeyRecord, caller: { requestId: string; clientAddress: string }): Promise<void> {
    const revoked = (await this.deps.revoke(record.id)) ?? record;
    await this.record(revoked, 'holder', { clientAddress: caller.clientAddress, requestId: caller.requestId });
  }

  /**
   * One token a secret scanner found: true when it is (or was) one of this gateway's keys. A key
   * that still works is revoked; one already revoked is left as it is (a report repeated, or the
   * same token found twice, changes nothing more). A previous secret whose grace period is over can
   * never work again: it is ours, and its key (with a new secret that did not leak) is left alone.
   */
  async revokeReported(token: string, report: LeakedKeyReport): Promise<boolean> {
    const { prefix } = this.deps;
    // Not of this environment's shape, or a checksum that fails: never issued here, no store asked.
    if (!isWellFormedKey(prefix, token) || failsChecksum(token, prefix)) return false;
    const hash = hashApiKey(token);
    const record = await this.deps.findByHash(hash);
    if (!record) return false;
    if (record.revokedAt !== null) return true;
    if (hash !== record.hash && !this.previousSecretWorks(record)) return true;
    const revoked = (await this.deps.revoke(record.id)) ?? record;
    await this.record(revoked, 'secret-scanning', { tokenType: report.type, url: report.url, source: report.source });
    return true;
  }

  /** The admin API's own revocation (DELETE /admin/keys/{id}, audited there): its webhook. */
  revokedByAdmin(record: ApiKeyRecord): void {
    this.deps.announce(record, 'admin');
  }

  private previousSecretWorks(record: ApiKeyRecord): boolean {
    return record.previousKeyExpiresAt !== null && Date.parse(record.previousKeyExpiresAt) > this.deps.clock.now();
  }

  /**
   * The log line and the trail entry, as an admin write has them, and the webhook. The revocation
   * is already stored: a trail that cannot be reached is logged, not a failure of the revocation.
   */
  private async record(record: ApiKeyRecord, by: RevokedBy, context: Record<string, unknown>): Promise<void> {
    const { logger, clock } = this.deps;
    logger.info({ audit: true, action: 'revoke', keyId: record.id, by, ...context }, `key revoked by ${by}`);
    this.deps.announce(record, by);
    const at = new Date(clock.now()).toISOString();
    try {
      await this.deps.auditLog.append({
        at,
        action: 'revoke',
        keyId: record.id,
        details: { revokedAt: record.revokedAt, by, ...context },
      });
    } catch (err) {
      logger.error(
        { err: (err as Error).message, action: 'revoke', keyId: record.id },
        'could not append to the audit trail',
      );
    }
  }
}
