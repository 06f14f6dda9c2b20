import path from 'node:path';
import type Database from 'better-sqlite3';
import type { WebhookEventType } from '../shared/config';
import { openSqliteDatabase, type Migration } from '../shared/sqlite/sqlite-database';
import { sqliteStatement, type SqliteErrorListener } from '../shared/sqlite/sqlite-failures';
import { SqliteWriteProbe, WRITE_PROBE_TABLE_SQL } from '../shared/sqlite/sqlite-write-probe';
import { systemClock } from '../shared/clock';
import type { ClaimedDelivery, Outbox, OutboxEvent } from './outbox';

export const WEBHOOK_OUTBOX_DATABASE_FILE = 'webhook-outbox.sqlite';
/** This store's name in errors, metrics and /readyz. */
const WEBHOOK_OUTBOX_DATABASE = 'webhook-outbox';

const SCHEMA_SQL = `
  CREATE TABLE IF NOT EXISTS webhook_events (
    id TEXT PRIMARY KEY, type TEXT NOT NULL, body TEXT NOT NULL, created_at INTEGER NOT NULL, deliveries_left INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX IF NOT EXISTS webhook_events_by_age ON webhook_events (created_at);
  CREATE TABLE IF NOT EXISTS webhook_deliveries (
    endpoint TEXT NOT NULL, event_id TEXT NOT NULL, due_at INTEGER NOT NULL, attempts INTEGER NOT NULL,
    PRIMARY KEY (endpoint, event_id)
  ) STRICT;
  CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (endpoint, due_at);
  CREATE TABLE IF NOT EXISTS webhook_seen (id TEXT PRIMARY KEY, until INTEGER NOT NULL) STRICT;`;

/** The schema of webhook-outbox.sqlite; files made before it was numbered (user_version 0) have step 1's tables already. */
const OUTBOX_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'events, deliveries per receiver, ids seen, and write_probe',
    up(db) {
      db.exec(WRITE_PROBE_TABLE_SQL);
      db.exec(SCHEMA_SQL);
    },
  },
  {
    version: 2,
    description: 'the receivers each process (worker) names, so that deliveries to a removed one can be dropped',
    up(db) {
      db.exec(
        'CREATE TABLE IF NOT EXISTS webhook_instances (instance TEXT PRIMARY KEY, live_until INTEGER NOT NULL, endpoints TEXT NOT NULL) STRICT',
      );
    },
  },
];

interface DeliveryRow {
  event_id: string;
  attempts: number;
  type: WebhookEventType;
  body: string;
  created_at: number;
}

/**
 * The outbox of a gateway without Redis (one process): SQLite under DATA_DIR, so an event seen
 * before a restart is still delivered after it. The same leases as in Redis, though one process
 * alone claims: a process killed mid-attempt finds its claims lapsed when it starts again.
 */
export class SqliteOutbox implements Outbox {
  private readonly db: Database.Database;
  private readonly writeProbe: SqliteWriteProbe;
  private readonly statements;

  constructor(
    dataDir: string,
    private readonly options: { busyTimeoutMs?: number; onSqliteError?: SqliteErrorListener } = {},
  ) {
    // NORMAL (as before): events reach the outbox in batches behind the answer, so a crash of the
    // machine can lose the last of them either way (docs: what can be lost).
    this.db = openSqliteDatabase({
      file: path.join(dataDir, WEBHOOK_OUTBOX_DATABASE_FILE),
      migrations: OUTBOX_MIGRATIONS,
      synchronous: 'NORMAL',
      busyTimeoutMs: options.busyTimeoutMs,
    });
    try {
      this.statements = this.prepare();
      this.writeProbe = new SqliteWriteProbe(this.db, WEBHOOK_OUTBOX_DATABASE, systemClock, options.onSqliteError);
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  private prepare() {
    const db = this.db;
    return {
      forgetSeen: db.prepare<[number]>('DELETE FROM webhook_seen WHERE until <= ?'),
      remember: db.prepare<[string, number]>(
        'INSERT INTO webhook_seen (id, until) VALUES (?, ?) ON CONFLICT (id) DO NOTHING',
      ),
      addEvent: db.prepare<[string, string, string, number, number]>(
        'INSERT INTO webhook_events (id, type, body, created_at, deliveries_left) VALUES (?, ?, ?, ?, ?)',
      ),
      addDelivery: db.prepare<[string, string, number]>(
        'INSERT OR IGNORE INTO webhook_deliveries (endpoint, event_id, due_at, attempts) VALUES (?, ?, ?, 0)',
      ),
      count: db.prepare<[]>('SELECT count(*) AS n FROM webhook_events'),
      oldest: db.prepare<[number]>('SELECT id, type FROM webhook_events ORDER BY created_at, id LIMIT ?'),
      dropDeliveries: db.prepare<[string]>('DELETE FROM webhook_deliveries WHERE event_id = ?'),
      dropEvent: db.prepare<[string]>('DELETE FROM webhook_events WHERE id = ?'),
      due: db.prepare<[string, number, number]>(
        `SELECT d.event_id, d.attempts, e.type, e.body, e.created_at FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
         WHERE d.endpoint = ? AND d.due_at <= ? ORDER BY d.due_at LIMIT ?`,
      ),
      lease: db.prepare<[number, string, string]>(
        'UPDATE webhook_deliveries SET due_at = ? WHERE endpoint = ? AND event_id = ?',
      ),
      reschedule: db.prepare<[number, number, string, string, number]>(
        'UPDATE webhook_deliveries SET due_at = ?, attempts = attempts + ? WHERE endpoint = ? AND event_id = ? AND due_at = ?',
      ),
      finishDelivery: db.prepare<[string, string, number]>(
        'DELETE FROM webhook_deliveries WHERE endpoint = ? AND event_id = ? AND due_at = ?',
      ),
      countDown: db.prepare<[string]>(
        'UPDATE webhook_events SET deliveries_left = deliveries_left - 1 WHERE id = ? RETURNING deliveries_left',
      ),
      nameReceivers: db.prepare<[string, number, string]>(
        'INSERT INTO webhook_instances (instance, live_until, endpoints) VALUES (?, ?, ?) ON CONFLICT (instance) DO UPDATE SET live_until = excluded.live_until, endpoints = excluded.endpoints',
      ),
      forgetLapsed: db.prepare<[number]>('DELETE FROM webhook_instances WHERE live_until <= ?'),
      forgetInstance: db.prepare<[string]>('DELETE FROM webhook_instances WHERE instance = ?'),
      named: db.prepare<[]>('SELECT endpoints FROM webhook_instances'),
      // One index step per endpoint that has deliveries (not a scan of them all).
      nextEndpoint: db.prepare<[string]>(
        'SELECT endpoint FROM webhook_deliveries WHERE endpoint > ? ORDER BY endpoint LIMIT 1',
      ),
      deliveriesTo: db.prepare<[string, number]>(
        'SELECT d.event_id, e.type FROM webhook_deliveries d LEFT JOIN webhook_events e ON e.id = d.event_id WHERE d.endpoint = ? LIMIT ?',
      ),
      dropDelivery: db.prepare<[string, string]>('DELETE FROM webhook_deliveries WHERE endpoint = ? AND event_id = ?'),
    };
  }

  private run<T>(work: () => T): T {
    return sqliteStatement(WEBHOOK_OUTBOX_DATABASE, work, this.options.onSqliteError);
  }

  async add(events: readonly OutboxEvent[], now: number, maxEvents: number): Promise<WebhookEventType[]> {
    const s = this.statements;
    return this.run(
      this.db.transaction(() => {
        s.forgetSeen.run(now);
        for (const e of events) {
          if (s.remember.run(e.id, e.seenUntil).changes === 0) continue;
          s.addEvent.run(e.id, e.type, e.body, e.createdAt, e.endpoints.length);
          for (const endpoint of e.endpoints) s.addDelivery.run(endpoint, e.id, now);
        }
        const excess = (s.count.get() as { n: number }).n - maxEvents;
        if (excess <= 0) return [];
        const oldest = s.oldest.all(excess) as Array<{ id: string; type: WebhookEventType }>;
        for (const { id } of oldest) {
          s.dropDeliveries.run(id);
          s.dropEvent.run(id);
        }
        return oldest.map((o) => o.type);
      }),
    );
  }

  async claim(endpoint: string, max: number, now: number, leaseUntil: number): Promise<ClaimedDelivery[]> {
    const s = this.statements;
    return this.run(
      this.db.transaction(() => {
        const rows = s.due.all(endpoint, now, max) as DeliveryRow[];
        return rows.map((row) => {
          // The due instant is the claim's name: a later answer for an older claim matches nothing.
          s.lease.run(leaseUntil, endpoint, row.event_id);
          return {
            endpoint,
            eventId: row.event_id,
            type: row.type,
            body: row.body,
            createdAt: row.created_at,
            attempts: row.attempts,
            leaseUntil,
          };
        });
      }),
    );
  }

  async finish(d: ClaimedDelivery): Promise<void> {
    const s = this.statements;
    this.run(
      this.db.transaction(() => {
        if (s.finishDelivery.run(d.endpoint, d.eventId, d.leaseUntil).changes === 0) return;
        const left = s.countDown.get(d.eventId) as { deliveries_left: number } | undefined;
        if (left !== undefined && left.deliveries_left <= 0) s.dropEvent.run(d.eventId);
      }),
    );
  }

  async retry(d: ClaimedDelivery, nextAt: number): Promise<void> {
    this.run(() => this.statements.reschedule.run(nextAt, 1, d.endpoint, d.eventId, d.leaseUntil));
  }

  async release(d: ClaimedDelivery, now: number): Promise<void> {
    this.run(() => this.statements.reschedule.run(now, 0, d.endpoint, d.eventId, d.leaseUntil));
  }

  async keepReceivers(
    instance: string,
    endpoints: readonly string[],
    now: number,
    liveUntil: number,
    maxDrops: number,
  ): Promise<WebhookEventType[]> {
    const s = this.statements;
    return this.run(
      this.db.transaction(() => {
        if (endpoints.length > 0) s.nameReceivers.run(instance, liveUntil, JSON.stringify(endpoints));
        else s.forgetInstance.run(instance);
        s.forgetLapsed.run(now);
        const named = new Set(
          (s.named.all() as Array<{ endpoints: string }>).flatMap((row) => JSON.parse(row.endpoints) as string[]),
        );
        const dropped: WebhookEventType[] = [];
        let budget = maxDrops;
        for (
          let row = s.nextEndpoint.get('') as { endpoint: string } | undefined;
          row !== undefined && budget > 0;
          row = s.nextEndpoint.get(row.endpoint) as { endpoint: string } | undefined
        ) {
          if (named.has(row.endpoint)) continue;
          const deliveries = s.deliveriesTo.all(row.endpoint, budget) as Array<{
            event_id: string;
            type: WebhookEventType | null;
          }>;
          budget -= deliveries.length;
          for (const { event_id: eventId, type } of deliveries) {
            s.dropDelivery.run(row.endpoint, eventId);
            if (type !== null) dropped.push(type);
            const left = s.countDown.get(eventId) as { deliveries_left: number } | undefined;
            if (left !== undefined && left.deliveries_left <= 0) s.dropEvent.run(eventId);
          }
        }
        return dropped;
      }),
    );
  }

  async forgetInstance(instance: string): Promise<void> {
    this.run(() => this.statements.forgetInstance.run(instance));
  }

  async size(): Promise<number> {
    return (this.statements.count.get() as { n: number }).n;
  }

  /** Throws when webhook-outbox.sqlite cannot take a write now (/readyz). */
  checkWrites(): void {
    this.writeProbe.check();
  }

  close(): void {
    this.db.close();
  }
}
