import type { Clock } from '../shared/clock';
import { addressGroup } from '../shared/http/ip-address';

/** A wrong token is answered no sooner than this: never faster than a right one, and slow to guess with. */
export const FAILED_TOKEN_DELAY_MS = 250;
const WINDOW_MS = 60_000;
/** Addresses remembered at once; a flood of new ones pushes out the oldest (the bound over all addresses still holds). */
const MAX_ADDRESSES = 10_000;

/** A fixed minute of failures from its first one. */
interface Minute {
  count: number;
  endsAt: number;
}

/** What a failure changed: whether its address, or all addresses together, just reached their bound. */
export interface FailureOutcome {
  addressLockedNow: boolean;
  allLockedNow: boolean;
}

/**
 * Failed admin tokens, in this process, with two bounds (issue 42): per address (a fixed minute
 * from its first failure, config `admin.failedTokensPerMinute`) and over all addresses together
 * (`admin.failedTokensPerMinuteTotal`), so that rotating source addresses (127.0.0.0/8 on the
 * host, an IPv6 /64 off it) gains nothing. Past either bound a wrong token is refused at once
 * with 429, without the delay, the per-refusal log line or the comparison's answer telling more
 * than a 401 would. The right token is never refused: it is checked first, so nobody can lock
 * the operator out. Guessing is made infeasible by the token itself (32+ characters required
 * outside development), not by this; this keeps a guesser's noise and cost bounded.
 */
export class FailedTokenLimiter {
  private readonly byAddress = new Map<string, Minute>();
  private all: Minute = { count: 0, endsAt: 0 };

  constructor(
    /** Config `admin.failedTokensPerMinute`. */
    private readonly perAddress: number,
    /** Config `admin.failedTokensPerMinuteTotal`. */
    private readonly total: number,
    private readonly clock: Clock,
  ) {}

  /** Milliseconds until a wrong token from `address` is answered normally again, or 0 if it is now. */
  lockedOutForMs(address: string): number {
    const now = this.clock.now();
    const allLeft = this.all.count >= this.total ? this.all.endsAt - now : 0;
    const key = addressGroup(address);
    const minute = this.byAddress.get(key);
    if (minute && minute.endsAt <= now) this.byAddress.delete(key);
    const addressLeft = minute && minute.endsAt > now && minute.count >= this.perAddress ? minute.endsAt - now : 0;
    return Math.max(allLeft, addressLeft, 0);
  }

  recordFailure(address: string): FailureOutcome {
    const now = this.clock.now();
    if (this.all.endsAt <= now) this.all = { count: 0, endsAt: now + WINDOW_MS };
    this.all.count++;
    const key = addressGroup(address);
    let minute = this.byAddress.get(key);
    if (!minute || minute.endsAt <= now) {
      if (!minute && this.byAddress.size >= MAX_ADDRESSES) this.byAddress.delete(this.byAddress.keys().next().value!);
      minute = { count: 0, endsAt: now + WINDOW_MS };
      this.byAddress.set(key, minute);
    }
    minute.count++;
    return { addressLockedNow: minute.count === this.perAddress, allLockedNow: this.all.count === this.total };
  }
}
