import type { ApiKeyRecord, ImportResult, KeyChange, KeyPatch, KeyRotation, KeyStore } from '../../../src/keys/types';

/**
 * A thin wrapper around a real KeyStore that counts lookups and can hold them: how the tests see
 * whether the resolver reached the store, without replacing the store.
 */
export class CountingKeyStore implements KeyStore {
  findByHashCalls = 0;
  changeListeners = 0;
  private readonly resyncListeners = new Set<() => void>();
  private readonly ownChangeListeners = new Set<(change: KeyChange) => void>();
  /** When set, findByHash reads the store, then waits for this before answering. */
  hold: Promise<void> | null = null;
  /** When set, the next findByHash call rejects with it (once). */
  failNext: Error | null = null;
  /** When set, findByHash answers with this instead of the inner store (a record deleted elsewhere). */
  findByHashOverride: ((hash: string) => Promise<ApiKeyRecord | null>) | null = null;

  constructor(readonly inner: KeyStore) {}

  async findByHash(hash: string): Promise<ApiKeyRecord | null> {
    this.findByHashCalls++;
    if (this.failNext) {
      const err = this.failNext;
      this.failNext = null;
      throw err;
    }
    const record = this.findByHashOverride ? await this.findByHashOverride(hash) : await this.inner.findByHash(hash);
    if (this.hold) await this.hold;
    return record;
  }

  insert(record: ApiKeyRecord): Promise<void> {
    return this.inner.insert(record);
  }
  get(id: string): Promise<ApiKeyRecord | null> {
    return this.inner.get(id);
  }
  list(): Promise<ApiKeyRecord[]> {
    return this.inner.list();
  }
  update(id: string, patch: KeyPatch, updatedAt: string): Promise<ApiKeyRecord | null> {
    return this.inner.update(id, patch, updatedAt);
  }
  revoke(id: string, revokedAt: string): Promise<ApiKeyRecord | null> {
    return this.inner.revoke(id, revokedAt);
  }
  rotate(id: string, rotation: KeyRotation, rotatedAt: string): Promise<ApiKeyRecord | null> {
    return this.inner.rotate(id, rotation, rotatedAt);
  }
  importRecords(records: ApiKeyRecord[]): Promise<ImportResult> {
    return this.inner.importRecords(records);
  }
  onChange(listener: (change: KeyChange) => void): () => void {
    this.changeListeners++;
    const off = this.inner.onChange(listener);
    this.ownChangeListeners.add(listener);
    let active = true;
    return () => {
      if (active) this.changeListeners--;
      active = false;
      this.ownChangeListeners.delete(listener);
      off();
    };
  }
  onResync(listener: () => void): () => void {
    const entry = () => listener();
    this.resyncListeners.add(entry);
    const off = this.inner.onResync?.(listener);
    return () => {
      this.resyncListeners.delete(entry);
      off?.();
    };
  }
  /** Announces a change as a shared store does for another instance's write (a restore's, say). */
  announce(change: KeyChange): void {
    for (const listener of this.ownChangeListeners) listener(change);
  }
  /** Signals a resync as a store does after its change subscription came back. */
  triggerResync(): void {
    for (const listener of this.resyncListeners) listener();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
