import type { WindowName } from '../limits/types';

/**
 * A consumer: the customer behind one or more keys (CONTRACT §4, §5). Its own limits are windows
 * shared by all its keys; any of the three may be absent. `allowedOperations` and
 * `allowedAddresses` are the consumer's access policy (CONTRACT §4), stored here and enforced by
 * the access-policy step; null: no list.
 */
export interface ConsumerLimits {
  perMinute?: number;
  perDay?: number;
  perMonth?: number;
  /** Windows enforced but shown in no header (CONTRACT §4): `minute` hides `consumer-minute`, and so on. */
  hiddenWindows?: WindowName[];
}

export interface ConsumerRecord {
  id: string;
  name: string;
  limits: ConsumerLimits;
  /** Day of the month (1..28) the consumer's month window starts on, 00:00 UTC. */
  billingDay: number;
  allowedOperations: string[] | null;
  allowedAddresses: string[] | null;
  createdAt: string;
  updatedAt: string;
}

/**
 * Where consumers live: Redis (shared by every instance) or SQLite in process. Every write is told
 * to every instance's listeners (by id), so the directory each instance holds follows within a second.
 */
export interface ConsumerStore {
  list(): Promise<ConsumerRecord[]>;
  get(id: string): Promise<ConsumerRecord | null>;
  /** Inserts or replaces the record with this id. */
  put(record: ConsumerRecord): Promise<void>;
  /** Brings every record to the given state, all or nothing (a backup's import). */
  putAll(records: readonly ConsumerRecord[]): Promise<void>;
  /** False when there was none. */
  delete(id: string): Promise<boolean>;
  /** Called with the id of every changed consumer, from this instance or another; returns an unsubscribe. */
  onChange(listener: (id: string) => void): () => void;
  /** Called when changes may have been missed (a subscription that came back): read everything again. */
  onResync?(listener: () => void): () => void;
  close(): Promise<void>;
}
