import type { ConsumerRecord, ConsumerStore } from '../../../src/consumers/types';

/**
 * A consumer store held in memory, for the pure logic over the ConsumerStore interface (the
 * directory, the lookup, the service's rules, the backup's lines). It records each call, can hold a
 * `list` or refuse a call, and tells its listeners only what the test says (a change message may
 * be lost, as on Redis). The real stores: test/integration/consumers/.
 */
export class MemoryConsumerStore implements ConsumerStore {
  readonly byId = new Map<string, ConsumerRecord>();
  readonly calls: string[] = [];
  /** Errors the next calls of a method throw, one each. */
  readonly refuse: Partial<Record<'list' | 'get' | 'put' | 'putAll' | 'delete', Error[]>> = {};
  /** Whether a write tells the change listeners (false: the message is lost). */
  announce = true;
  private readonly changeListeners = new Set<(id: string) => void>();
  private readonly resyncListeners = new Set<() => void>();

  constructor(records: readonly ConsumerRecord[] = []) {
    for (const record of records) this.byId.set(record.id, record);
  }

  private called(method: keyof MemoryConsumerStore['refuse'], detail = ''): void {
    this.calls.push(detail === '' ? method : `${method} ${detail}`);
    const err = this.refuse[method]?.shift();
    if (err) throw err;
  }

  async list(): Promise<ConsumerRecord[]> {
    this.called('list');
    return [...this.byId.values()];
  }

  async get(id: string): Promise<ConsumerRecord | null> {
    this.called('get', id);
    return this.byId.get(id) ?? null;
  }

  async put(record: ConsumerRecord): Promise<void> {
    this.called('put', record.id);
    this.byId.set(record.id, record);
    if (this.announce) this.changed(record.id);
  }

  async putAll(records: readonly ConsumerRecord[]): Promise<void> {
    this.called('putAll', records.map((r) => r.id).join(','));
    for (const record of records) this.byId.set(record.id, record);
    if (this.announce) for (const record of records) this.changed(record.id);
  }

  async delete(id: string): Promise<boolean> {
    this.called('delete', id);
    const had = this.byId.delete(id);
    if (had && this.announce) this.changed(id);
    return had;
  }

  /** A change message for `id`, as another instance's write sends it. */
  changed(id: string): void {
    for (const listener of this.changeListeners) listener(id);
  }

  /** Changes may have been missed (a subscription that came back). */
  resync(): void {
    for (const listener of this.resyncListeners) listener();
  }

  listeners(): number {
    return this.changeListeners.size + this.resyncListeners.size;
  }

  onChange(listener: (id: string) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  onResync(listener: () => void): () => void {
    this.resyncListeners.add(listener);
    return () => this.resyncListeners.delete(listener);
  }

  async close(): Promise<void> {}
}

let sequence = 0;

/** A consumer record, valid as the stores keep it; `fields` override. */
export function consumerRecord(fields: Partial<ConsumerRecord> = {}): ConsumerRecord {
  sequence += 1;
  return {
    id: 'con_' + sequence.toString(16).padStart(24, '0'),
    name: `consumer ${sequence}`,
    limits: {},
    billingDay: 1,
    allowedOperations: null,
    allowedAddresses: null,
    createdAt: '2026-03-01T00:00:00.000Z',
    updatedAt: '2026-03-01T00:00:00.000Z',
    ...fields,
  };
}
