import type { RedisClient } from '../shared/redis';

/** Entries kept: the oldest go first beyond this (CONTRACT §5). */
export const MAX_AUDIT_ENTRIES = 10_000;

export type AuditAction = 'create' | 'update' | 'rotate' | 'revoke' | 'unban';

export interface AuditEntry {
  /** ISO instant of the write. */
  at: string;
  action: AuditAction;
  keyId: string;
  /** What changed, in the admin API's own terms. Never a key or a hash. */
  details: Record<string, unknown>;
}

/** Every admin write from every instance, newest first. */
export interface AuditLog {
  append(entry: AuditEntry): Promise<void>;
  /** The newest `limit` entries, newest first. */
  recent(limit: number): Promise<AuditEntry[]>;
}

/** The single-instance trail: held in process, bounded like the Redis one. */
export class MemoryAuditLog implements AuditLog {
  private readonly entries: AuditEntry[] = [];

  async append(entry: AuditEntry): Promise<void> {
    this.entries.push(entry);
    if (this.entries.length > MAX_AUDIT_ENTRIES) this.entries.splice(0, this.entries.length - MAX_AUDIT_ENTRIES);
  }

  async recent(limit: number): Promise<AuditEntry[]> {
    return this.entries.slice(-limit).reverse();
  }
}

/**
 * A capped stream shared by every instance: XADD with MAXLEN keeps exactly the last 10,000 and the
 * stream's ids order entries across instances; XREVRANGE reads them newest first.
 */
export class RedisAuditLog implements AuditLog {
  private readonly key: string;

  constructor(
    private readonly redis: RedisClient,
    namespace: string,
  ) {
    this.key = `${namespace}:audit`;
  }

  async append(entry: AuditEntry): Promise<void> {
    await this.redis.xadd(this.key, 'MAXLEN', String(MAX_AUDIT_ENTRIES), '*', 'entry', JSON.stringify(entry));
  }

  async recent(limit: number): Promise<AuditEntry[]> {
    const rows = await this.redis.xrevrange(this.key, '+', '-', 'COUNT', limit);
    const entries: AuditEntry[] = [];
    for (const [, fields] of rows) {
      const index = fields.indexOf('entry');
      if (index >= 0 && fields[index + 1] !== undefined) entries.push(JSON.parse(fields[index + 1]!) as AuditEntry);
    }
    return entries;
  }
}
