import { Listeners } from '../shared/listeners';
import { SqliteConsumerTable } from './sqlite-consumer-table';
import type { RedisConsumerStore } from './redis-consumer-store';
import type { ConsumerRecord, ConsumerStore } from './types';

export function consumerReplicaFileName(namespace: string): string {
  return `consumers-replica-${namespace.replace(/[^A-Za-z0-9_-]/g, '_')}.sqlite`;
}

export interface DurableConsumerOptions {
  dataDir: string;
  namespace: string;
  /** How often Redis is checked for lost consumers (config `keys.lossCheckSeconds`). */
  checkIntervalMs: number;
  /** Consumers Redis had lost and this instance put back (logged at error, as for keys). */
  onRestored(ids: string[]): void;
  onCheckFailed(err: unknown): void;
}

/**
 * The Redis consumer store with this instance's durable copy behind it (CONTRACT §4: consumers are
 * kept through Redis data loss like keys). The copy follows every write and change; while Redis
 * holds its marker the copy is brought to what Redis holds (deletions included), and when the
 * marker is gone (Redis came back empty) the copy's records are put back.
 */
export class DurableConsumerStore implements ConsumerStore {
  private readonly copy: SqliteConsumerTable;
  private readonly offs: Array<() => void>;
  private timer: NodeJS.Timeout | undefined;
  private readonly restored = new Listeners<[]>();

  constructor(
    private readonly redis: RedisConsumerStore,
    private readonly options: DurableConsumerOptions,
  ) {
    this.copy = new SqliteConsumerTable(options.dataDir, consumerReplicaFileName(options.namespace));
    this.offs = [redis.onChange((id) => void this.follow(id)), redis.onResync(() => void this.check())];
  }

  async start(): Promise<void> {
    await this.check();
    this.timer = setInterval(() => void this.check(), this.options.checkIntervalMs);
    this.timer.unref();
  }

  /** Restores what Redis lost, or copies what it holds; never throws (a failure is reported). */
  async check(): Promise<void> {
    try {
      if (await this.redis.markerPresent()) {
        this.copy.replaceAll(await this.redis.list());
        return;
      }
      const known = this.copy.all();
      if (known.length === 0) return;
      const ids = await this.redis.restore(known);
      if (ids.length > 0) {
        this.options.onRestored(ids);
        this.restored.emit();
      }
    } catch (err) {
      this.options.onCheckFailed(err);
    }
  }

  private async follow(id: string): Promise<void> {
    try {
      const record = await this.redis.get(id);
      if (record) this.copy.putAll([record]);
      else if (await this.redis.markerPresent()) this.copy.delete(id);
    } catch (err) {
      this.options.onCheckFailed(err);
    }
  }

  async list(): Promise<ConsumerRecord[]> {
    const records = await this.redis.list();
    return records.length > 0 ? records : this.copy.all();
  }

  async get(id: string): Promise<ConsumerRecord | null> {
    return (await this.redis.get(id)) ?? this.copy.get(id);
  }

  async put(record: ConsumerRecord): Promise<void> {
    await this.redis.put(record);
    this.copy.putAll([record]);
  }

  async putAll(records: readonly ConsumerRecord[]): Promise<void> {
    await this.redis.putAll(records);
    this.copy.putAll(records);
  }

  async delete(id: string): Promise<boolean> {
    const deleted = await this.redis.delete(id);
    this.copy.delete(id);
    return deleted;
  }

  onChange(listener: (id: string) => void): () => void {
    return this.redis.onChange(listener);
  }

  /** A resync of Redis's subscription, or a restore: the directory reads everything again. */
  onResync(listener: () => void): () => void {
    const a = this.redis.onResync(listener);
    const b = this.restored.add(listener);
    return () => {
      a();
      b();
    };
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    for (const off of this.offs) off();
    await this.redis.close();
    this.copy.close();
  }
}
