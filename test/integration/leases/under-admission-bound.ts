import { LEASE_LIFE_MS, RATE_BUCKET_MS } from '../../../src/limits/leases/lease-settings';
import { wantedLeaseUnits } from '../../../src/limits/leases/lease-size';
import { HARNESS_BUSY_REQUESTS_PER_SECOND, harnessConfigYaml } from './fleet-kit';
import { MAX_IN_FLIGHT, type ClientPlan } from './load-clients';
import type { UnansweredRequest, WindowCount, WindowTally } from './window-tally';

/**
 * The bound on under-admission the faulted harness asserts (docs/scaling.md "The bound on
 * under-admission"), per window a limit filled. When a limit refused a request at store time t,
 * the window held more than limit − cost units; each of them was either a request some client saw
 * admitted, or a unit no client saw used: units out in a lease at t, or a request the store
 * counted whose client got no answer or a 5xx. So admitted ≥ limit − bound, with bound:
 *   (the limit's largest cost − 1)                           the refused request did not fit
 * + maxLease × processes serving                              one lease per process and key out at t
 * + maxLease × processes SIGKILLed in the window              their leases (or the take under way) never come back
 * + maxLease × processes serving × store outages in it        each process's lease whose return failed
 * + maxLease × processes serving × takes per outage           takes the store ran within their deadline
 *                                                             but after the gateway's command timeout had
 *                                                             answered 503: a lease no one holds
 * + the units of every unanswered request in the window       counted, maybe, and seen by no client.
 * maxLease is what the product sizes a lease at for the most one process may see of a client's key
 * (a consumer's: summed over its keys), from the constants the product sizes leases with. A process
 * has one take of a key under way at a time (leasing-key-limiter.ts `taking`), and a take the store
 * holds ends at the command timeout: an outage of D ms holds at most ⌈D ÷ timeout⌉ + 1 takes per
 * process and key (a disconnected store runs none: ioredis's offline queue is off). Of those, the
 * store counts only the ones it runs before their deadline (src/limits/redis/command-deadline.ts:
 * sent + timeout + 50 ms + the clock offset, bounded by the tightest reply): a take sent less than
 * the timeout plus 50 ms before the outage ended, so one per process and key; two are allowed, for
 * a gateway whose event loop read the reply late.
 */

/** A fault as the run inflicted it: when, and what it cost in leases. */
export interface FaultRecord {
  what: string;
  /** Client epoch ms the fault began, and when it had struck (the processes dead, the store answering again). */
  startedAt: number;
  struckAt: number;
  /** Processes serving requests that the fault SIGKILLed (a WORKERS=2 supervisor serves none). */
  processesKilled: number;
  /** The store stopped answering (paused, restarted): a lease out may not have come back. */
  storeOutage: boolean;
}

/** A filled window, what it admitted and the most it may fall short of its limit, with the bound's terms. */
export interface WindowBound extends WindowCount {
  limitUnits: number;
  bound: number;
  terms: string;
  /** The store's own count of the window at its end (window-watch.ts); absent when not read. */
  storeCounted?: number | null;
}

/** The gateways' Redis command timeout, as the harness's config sets it. */
const COMMAND_TIMEOUT_MS = Number(/commandTimeoutMs: (\d+)/.exec(harnessConfigYaml('bound', 1))![1]);

/**
 * Requests one process may count for one client's key within one of the RecentRate's buckets
 * (RATE_BUCKET_MS: a lease is sized from the busiest bucket's rate): its share of the client's ticks
 * in that span (setInterval truncates the period to whole ms; one more at the span's start; the
 * client sends to the `instances` in turn), the probe that found the key before the clients started,
 * and the MAX_IN_FLIGHT requests sent before the span that may reach the process inside it (a
 * stalled process serves them at once).
 */
export function requestsPerBucket(plan: Pick<ClientPlan, 'perSecond'>, instances: number): number {
  const ticks = Math.floor(RATE_BUCKET_MS / Math.trunc(1_000 / plan.perSecond)) + 1;
  return Math.ceil(ticks / instances) + 1 + MAX_IN_FLIGHT;
}

/** The largest lease one process may take for one client's key (units): 200 ms of its busiest bucket's rate. */
export function planMaxLease(plan: ClientPlan, instances: number): number {
  const peakPerSecond = (requestsPerBucket(plan, instances) * 1_000) / RATE_BUCKET_MS;
  return wantedLeaseUnits(peakPerSecond, plan.units, HARNESS_BUSY_REQUESTS_PER_SECOND);
}

/** Takes an outage may swallow per process and key: those held, but the store runs only the last one or two by their deadline. */
const TAKES_RUN_PAST_TIMEOUT = 2;
function takesPerOutage(fault: FaultRecord): number {
  return Math.min(Math.ceil((fault.struckAt - fault.startedAt) / COMMAND_TIMEOUT_MS) + 1, TAKES_RUN_PAST_TIMEOUT);
}

/** The minutes (as X-RateLimit-Reset names them, epoch seconds) that overlap [fromMs, toMs]. */
export function minutesOverlapping(fromMs: number, toMs: number): number[] {
  const minutes: number[] = [];
  for (let m = Math.floor(fromMs / 60_000); m <= Math.floor(toMs / 60_000); m++) minutes.push((m + 1) * 60);
  return minutes;
}

/** Minutes a fault's lost leases counted in: any lease alive when it struck, taken up to a lease's life before. */
function faultMinutes(fault: FaultRecord): number[] {
  return minutesOverlapping(fault.startedAt - LEASE_LIFE_MS, fault.struckAt);
}

/**
 * Minutes the store may have counted an unanswered request in: from its sending to its answer,
 * or to the end of a store outage under way meanwhile (CLIENT PAUSE runs held commands when it
 * ends, after the gateway's command timeout answered 503).
 */
function unansweredMinutes(request: UnansweredRequest, faults: readonly FaultRecord[]): number[] {
  let until = request.answeredAt;
  for (const fault of faults)
    if (fault.storeOutage && fault.startedAt <= request.answeredAt && fault.struckAt >= request.sentAt)
      until = Math.max(until, fault.struckAt);
  return minutesOverlapping(request.sentAt, until);
}

export interface BoundInputs {
  tally: WindowTally<ClientPlan>;
  plans: readonly ClientPlan[];
  faults: readonly FaultRecord[];
  limits: Readonly<Record<string, number>>;
  processesServing: number;
  /** Instances the clients send to in turn. */
  instances: number;
}

/** The bound of every window a limit filled in the run. */
export function underAdmissionBounds(run: BoundInputs): WindowBound[] {
  return run.tally.filled().map((window) => boundOf(window, run));
}

function boundOf(window: WindowCount, run: BoundInputs): WindowBound {
  const counting = run.plans.filter((plan) => plan.limits.includes(window.limit));
  const maxLease = counting.reduce((sum, plan) => sum + planMaxLease(plan, run.instances), 0);
  const maxCost = Math.max(1, ...counting.map((plan) => plan.units));
  const inWindow = run.faults.filter((fault) => faultMinutes(fault).includes(window.resetAt));
  const killed = inWindow.reduce((sum, fault) => sum + fault.processesKilled, 0);
  const outages = inWindow.filter((fault) => fault.storeOutage);
  const takes = outages.reduce((sum, fault) => sum + takesPerOutage(fault), 0);
  const serving = run.processesServing;
  const leases = serving + killed + serving * outages.length + serving * takes;
  let unanswered = 0;
  let unansweredUnits = 0;
  let outageUnits = 0;
  for (const lost of run.tally.unanswered) {
    if (!lost.request.limits.includes(window.limit)) continue;
    if (!unansweredMinutes(lost, run.faults).includes(window.resetAt)) continue;
    unanswered++;
    unansweredUnits += lost.request.units;
    if (outages.some((fault) => fault.startedAt <= lost.answeredAt && fault.struckAt >= lost.sentAt))
      outageUnits += lost.request.units;
  }
  const bound = maxCost - 1 + maxLease * leases + unansweredUnits;
  const terms =
    `${maxCost - 1} + ${maxLease}×(${serving} serving + ${killed} killed + ${serving}×${outages.length} outages` +
    ` + ${serving}×${takes} takes) + ${unansweredUnits} (${unanswered} unanswered, ${outageUnits} units of them` +
    ` during a store outage: a paused store runs them when it answers again)`;
  return { ...window, limitUnits: run.limits[window.limit] ?? 0, bound, terms };
}

/** Windows that admitted fewer than limit − bound: under-admission beyond what the docs promise. */
export function beyondBound(bounds: readonly WindowBound[]): WindowBound[] {
  return bounds.filter((window) => window.units < window.limitUnits - window.bound);
}

/** One line per filled window, for the failure's evidence and the docs. */
export function describeBounds(bounds: readonly WindowBound[]): string {
  return bounds
    .map(
      (w) =>
        `${w.limit}@${new Date(w.resetAt * 1000).toISOString().slice(11, 19)}: admitted ${w.units} of ${w.limitUnits}, ` +
        `short ${w.limitUnits - w.units}, bound ${w.bound} = ${w.terms}${storeAccount(w)}`,
    )
    .join('; ');
}

/** What the store counted in the window against what clients saw admitted: the units no client saw used. */
function storeAccount(w: WindowBound): string {
  if (w.storeCounted === undefined || w.storeCounted === null) return '';
  return `; the store counted ${w.storeCounted}, ${w.storeCounted - w.units} units no client saw admitted`;
}
