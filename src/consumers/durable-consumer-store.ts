import { Listeners } from '../shared/listeners';
import { LossCheck, type DataLossEvent } from '../shared/redis/loss-check';
import type { RecordCopy } from '../shared/redis/record-copy';
import { byCreation } from './consumer-record';
import { openConsumerTable } from './sqlite-consumer-table';
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
  onDataLoss(event: DataLossEvent): void;
  onCheckFailed(err: unknown): void;
}

/**
 * The Redis consumer store with this instance's durable copy behind it (CONTRACT §4: consumers are
 * kept through Redis data loss like keys), by the same copy and loss check as the key records
 * (shared/redis/record-copy.ts, loss-check.ts): Redis's marker gone, fewer consumers in Redis than
 * in the copy, or its writes counter gone back (a failover to a replica that missed writes), and
 * the consumers Redis lacks are put back. The copy follows every write and change, and a full read
 * at start, after each resync and each check; it forgets a consumer only when Redis says it was
 * deleted (its `deleted` entry), never because Redis lacks it.
 */
export class DurableConsumerStore implements ConsumerStore {
  private readonly copy: RecordCopy<ConsumerRecord>;
  private readonly monitor: LossCheck<ConsumerRecord>;
  private readonly offs: Array<() => void>;
  private timer: NodeJS.Timeout | undefined;
  private readonly restored = new Listeners<[]>();

  constructor(
    private readonly redis: RedisConsumerStore,
    private readonly options: DurableConsumerOptions,
  ) {
    this.copy = openConsumerTable(options.dataDir, consumerReplicaFileName(options.namespace));
    this.monitor = new LossCheck(redis, this.copy, {
      intervalMs: options.checkIntervalMs,
      onDataLoss: (event) => {
        options.onDataLoss(event);
        this.restored.emit();
      },
      onCheckFailed: options.onCheckFailed,
    });
    this.offs = [redis.onChange((id) => void this.follow(id)), redis.onResync(() => void this.check())];
  }

  async start(): Promise<void> {
    await this.check();
    this.timer = setInterval(() => void this.check(), this.options.checkIntervalMs);
    this.timer.unref();
  }

  /** Restores what Redis lost, then copies what it holds; never throws (a failure is reported). */
  async check(): Promise<void> {
    await this.monitor.checkSoon();
    try {
      const records = await this.redis.list();
      this.copy.putAll(records);
      const held = new Set(records.map((r) => r.id));
      const absent = this.copy.all().filter((r) => !held.has(r.id));
      for (const id of await this.redis.deletedOf(absent.map((r) => r.id))) this.copy.forget(id);
    } catch (err) {
      this.options.onCheckFailed(err);
    }
  }

  private async follow(id: string): Promise<void> {
    try {
      const record = await this.redis.get(id);
      if (record) this.copy.putAll([record]);
      else if ((await this.redis.deletedOf([id])).length > 0) this.copy.forget(id);
    } catch (err) {
      this.options.onCheckFailed(err);
    }
  }

  async list(): Promise<ConsumerRecord[]> {
    const records = await this.redis.list();
    return records.length > 0 ? records : this.copy.all().sort(byCreation);
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
    this.copy.forget(id);
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

  /** Throws when the durable copy's file cannot take a write now (the gateway's /readyz). */
  checkWrites(): void {
    this.copy.checkWrites();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    this.monitor.stop();
    for (const off of this.offs) off();
    await this.redis.close();
    this.copy.close();
  }
}
