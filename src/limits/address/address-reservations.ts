import type { Clock } from '../../shared/clock';
import type { AddressDecision } from '../types';

/** What one reservation got from the shared count. */
export interface Reservation {
  /** Units this instance may hand out itself (0 when the address is over its limit). */
  granted: number;
  /** The shared count's remaining units after this reservation (not counting `granted`). */
  remaining: number;
  /** When the address's window ends (epoch ms). */
  resetAt: number;
}

export interface ReservationSource {
  /** Takes `units` from the address's shared window at once: one store command. */
  reserve(address: string, units: number): Promise<Reservation>;
}

interface Entry {
  units: number;
  remaining: number;
  resetAt: number;
  /** Until then the address is over its limit: refused here, without the store. */
  refused: boolean;
  pending: Promise<void> | null;
}

/** Default units per reservation: a flood from one address costs about perMinute / 10 + 1 commands a minute per instance. */
export const DEFAULT_RESERVATION_UNITS = 10;
const MAX_ADDRESSES = 10_000;

/**
 * The anonymous limit for requests whose key was proven never issued: units are taken from the
 * address's shared window (the same Redis count every other anonymous request uses) `units` at a
 * time and handed out here, so one address's flood of made-up keys costs the store one command per
 * `units` requests, then none once the window is used up (until it ends).
 *
 * Exactness: an address never gets more than the limit across instances (every unit handed out was
 * counted in Redis first). It may get fewer: units reserved by one instance and not used before
 * the window ends are lost to the others, at most `units - 1` per instance and address.
 */
export class AddressReservations {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly source: ReservationSource,
    private readonly perMinute: number,
    private readonly clock: Clock,
    private readonly units: number = DEFAULT_RESERVATION_UNITS,
  ) {}

  /**
   * A unit this instance already holds for the address, if any: every anonymous request of the
   * address uses these first, whatever its key, so that on one instance no reserved unit is left
   * unused while a request is refused.
   */
  takeHeld(address: string): AddressDecision | null {
    const entry = this.entries.get(address);
    if (!entry || entry.units === 0 || entry.resetAt <= this.clock.now()) return null;
    entry.units--;
    return this.decision(true, entry);
  }

  /** Units held here for the address (they are still the address's, so its headers count them). */
  held(address: string): number {
    const entry = this.entries.get(address);
    return entry && entry.resetAt > this.clock.now() ? entry.units : 0;
  }

  async consume(address: string): Promise<AddressDecision> {
    for (;;) {
      const entry = this.entryOf(address);
      if (entry.units > 0) {
        entry.units--;
        return this.decision(true, entry);
      }
      if (entry.refused) return this.decision(false, entry);
      entry.pending ??= this.reserve(address, entry);
      await entry.pending;
    }
  }

  private entryOf(address: string): Entry {
    const now = this.clock.now();
    let entry = this.entries.get(address);
    if (entry && entry.resetAt <= now && !entry.pending) {
      this.entries.delete(address);
      entry = undefined;
    }
    if (!entry) {
      entry = { units: 0, remaining: this.perMinute, resetAt: now + 60_000, refused: false, pending: null };
      this.entries.set(address, entry);
      // Oldest first in Map order; dropping one only loses its unused units (fewer admitted, never more).
      if (this.entries.size > MAX_ADDRESSES) this.entries.delete(this.entries.keys().next().value!);
    }
    return entry;
  }

  private async reserve(address: string, entry: Entry): Promise<void> {
    try {
      const reservation = await this.source.reserve(address, Math.min(this.units, this.perMinute));
      entry.units += reservation.granted;
      entry.remaining = reservation.remaining;
      // Never in the past, or the entry would be dropped before its units are used.
      entry.resetAt = Math.max(reservation.resetAt, this.clock.now() + 1000);
      entry.refused = reservation.granted === 0;
    } finally {
      entry.pending = null;
    }
  }

  private decision(allowed: boolean, entry: Entry): AddressDecision {
    const waitMs = Math.max(1000, entry.resetAt - this.clock.now());
    return {
      allowed,
      window: { limit: this.perMinute, remaining: allowed ? entry.remaining + entry.units : 0, resetAt: entry.resetAt },
      retryAfterMs: allowed ? 0 : waitMs,
    };
  }
}
