import type { PeriodTally } from '../key-activity';

/**
 * The usage ledger's period counts, as the closing of periods reads them (CONTRACT §5, Usage
 * events). They are written by the usage history's flush (KeyActivityStore.add), in the same write
 * as the day's counts the usage export reads, so the two agree to the unit.
 */

/** One key's day with period counts written since the closer last looked: its work list. */
export interface TouchedKeyDay {
  periodMs: number;
  /** Days since the epoch. */
  day: number;
  keyId: string;
  /** Epoch ms of the latest write: the entry is forgotten only if no write came after it. */
  mark: number;
}

export interface UsagePeriodLedger {
  /** The key-days written to since they were last forgotten, oldest mark first, at most `max`. */
  touched(max: number): Promise<TouchedKeyDay[]>;
  /** Forgets the entry, unless a write marked it again since it was read. */
  untouch(entry: TouchedKeyDay): Promise<void>;
  /** The key's period counts of that day and length: period start (epoch ms) → counts. */
  periodsOf(keyId: string, periodMs: number, day: number): Promise<Map<number, PeriodTally>>;
}

/** How long period counts (and what was sent of them) are kept: beyond OpenMeter's 32 days of de-duplication. */
export const PERIOD_DAYS_KEPT = 35;

/** `periodMs:day:keyId`, the member naming a touched key-day (key ids hold no `:`). */
export function touchedMember(periodMs: number, day: number, keyId: string): string {
  return `${periodMs}:${day}:${keyId}`;
}

export function parseTouchedMember(member: string, mark: number): TouchedKeyDay | null {
  const match = /^(\d+):(\d+):(.+)$/.exec(member);
  if (!match) return null;
  return { periodMs: Number(match[1]), day: Number(match[2]), keyId: match[3]!, mark };
}
