import type { MonthCount } from '../windows/month-window';

/**
 * What every script of the Lua model that answers windows replies (lua-model.ts, `decision_reply`),
 * one flat array of integers:
 *
 *   1 outcome (0 allowed, 1 refused, 2 banned, 3 refused and banned now, 4 refused by maxInFlight;
 *     a read answers 0), 2 now (the script's clock, epoch ms), 3 the ban's end (0 for none), 4 the
 *     leases the key's set holds with the request's own (an admission with maxInFlight; else 0),
 *   5..11 the key's windows: minute count, day count, minute reset (0: the end of the UTC minute),
 *     month count, month credits, month start, month end (all 0 without a month window),
 *   12..18 the same for the key's consumer, in a script that decides or reads a consumer's windows.
 *
 * A refusal's windows are as they stand (nothing counted), an admission's with its units.
 */
export interface DecisionReply {
  outcome: number;
  now: number;
  bannedUntil: number;
  held: number;
  key: WindowCounts;
  /** Present when the script had a consumer's windows. */
  consumer?: WindowCounts;
}

/** One holder's windows in a reply. */
export interface WindowCounts {
  minuteCount: number;
  dayCount: number;
  /** When the minute frees a unit; 0: the end of the UTC minute (a fixed minute). */
  minuteResetAt: number;
  month: MonthCount;
}

/** Where the key's windows start in a reply, and how many fields a holder's take. */
const KEY_AT = 4;
const HOLDER_FIELDS = 7;

function windowCountsAt(reply: readonly number[], at: number): WindowCounts {
  return {
    minuteCount: reply[at]!,
    dayCount: reply[at + 1]!,
    minuteResetAt: reply[at + 2]!,
    month: { count: reply[at + 3]!, credits: reply[at + 4]!, startAt: reply[at + 5]!, resetAt: reply[at + 6]! },
  };
}

/** The named fields of a script's reply. */
export function decodeDecisionReply(reply: readonly number[]): DecisionReply {
  const decoded: DecisionReply = {
    outcome: reply[0]!,
    now: reply[1]!,
    bannedUntil: reply[2]!,
    held: reply[3]!,
    key: windowCountsAt(reply, KEY_AT),
  };
  if (reply.length >= KEY_AT + 2 * HOLDER_FIELDS) decoded.consumer = windowCountsAt(reply, KEY_AT + HOLDER_FIELDS);
  return decoded;
}
