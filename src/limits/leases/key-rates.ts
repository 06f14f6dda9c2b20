import type { Clock } from '../../shared/clock';
import { RecentRate } from './recent-rate';

/** The rate this instance sees for each key it serves (recent-rate.ts), for sizing leases. */
export class KeyRates {
  private readonly rates = new Map<string, RecentRate>();

  constructor(private readonly clock: Clock) {}

  /** One request of `keyId` seen now. */
  record(keyId: string): void {
    let rate = this.rates.get(keyId);
    if (!rate) this.rates.set(keyId, (rate = new RecentRate(this.clock)));
    rate.record();
  }

  /** Requests per second of `keyId` on this instance over the rate interval (0 for a key not seen). */
  perSecond(keyId: string): number {
    return this.rates.get(keyId)?.perSecond() ?? 0;
  }

  /** Requests per second of `keyId`'s busiest bucket of the rate interval (0 for a key not seen): what sizes its lease. */
  peakPerSecond(keyId: string): number {
    return this.rates.get(keyId)?.peakPerSecond() ?? 0;
  }

  /** Forgets keys not seen for a whole interval (call now and then: keeps the map to the busy keys). */
  forgetIdle(): void {
    // Deleting the entry being visited is safe in a Map's iteration: no copy of the map needed.
    for (const [keyId, rate] of this.rates) if (rate.idle()) this.rates.delete(keyId);
  }

  get size(): number {
    return this.rates.size;
  }
}
