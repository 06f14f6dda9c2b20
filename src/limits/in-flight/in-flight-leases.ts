import type { InFlightLease } from '../types';

/**
 * A key's slots under its maxInFlight in one process (the in-process store, and the fallback when
 * Redis does not answer): leases that expire, as in Redis (redis-key-limiter.ts), so that a slot
 * whose release never comes (a bug, a lost event) frees itself after its ttl rather than never.
 */
export class InFlightLeases {
  /** Per key: lease id → expiry (epoch ms). A key holding none has no entry. */
  private readonly byKey = new Map<string, Map<string, number>>();

  /** Whether the key has a free slot under `lease.max` (expired leases dropped first). */
  hasRoom(keyId: string, lease: InFlightLease, now: number): boolean {
    return (this.prune(keyId, now)?.size ?? 0) < lease.max;
  }

  /** Records the slot once the request is admitted (a request refused by its windows holds none). */
  hold(keyId: string, lease: InFlightLease, now: number): void {
    let held = this.byKey.get(keyId);
    if (!held) this.byKey.set(keyId, (held = new Map()));
    held.set(lease.id, now + lease.ttlMs);
  }

  release(keyId: string, leaseId: string): void {
    const held = this.byKey.get(keyId);
    if (!held) return;
    held.delete(leaseId);
    if (held.size === 0) this.byKey.delete(keyId);
  }

  /** Slots a key holds now. */
  heldBy(keyId: string, now: number): number {
    return this.prune(keyId, now)?.size ?? 0;
  }

  private prune(keyId: string, now: number): Map<string, number> | undefined {
    const held = this.byKey.get(keyId);
    if (!held) return undefined;
    for (const [id, expiresAt] of held) if (expiresAt <= now) held.delete(id);
    if (held.size === 0) {
      this.byKey.delete(keyId);
      return undefined;
    }
    return held;
  }
}
