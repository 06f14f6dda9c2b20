import type { KeyRef, RefusingWindow } from '../types';
import { LEASE_LIFE_MS } from './lease-settings';

/**
 * One lease of units as one instance holds it: what the store counted for it, in which windows,
 * and what requests have used of it. Pure functions over it; the book (lease-book.ts) keeps them.
 *
 * Times: the store's (Redis TIME) for the windows, the instance's own clock for the lease's life,
 * joined at the round trip that took the lease so that no clock skew can stretch a lease past its
 * window (leaseExpiry).
 */

/** A window the lease's units were counted in, as the store answered at the round trip that took it. */
export interface LeaseWindow {
  name: RefusingWindow;
  limit: number;
  /** Units left in the window in the store after it counted the request and the lease. */
  remaining: number;
  /** Store epoch ms the window started: identifies the window when units go back (the store compares). */
  startAt: number;
  /** Store epoch ms the window ends (starts afresh). */
  resetAt: number;
}

/** What the store answered when it counted a lease (besides the request that asked for it). */
export interface LeaseGrant {
  /** Units counted in every window of `windows` for the lease (a multiple of nothing: costs vary). */
  units: number;
  windows: readonly LeaseWindow[];
  /** Store epoch ms of the decision (Redis TIME). */
  storeNow: number;
}

/** Whose lease: the limiter's key reference, a key and the consumer whose windows it counted in (absent: none). */
export type LeaseHolder = KeyRef;

export interface Lease extends LeaseGrant {
  holder: LeaseHolder;
  /** Units requests have been admitted with since the lease was taken. */
  used: number;
  /** Instance epoch ms (its clock) after which no request may use the lease. */
  expiresAt: number;
  /** Instance epoch ms the round trip that took the lease began. */
  sentAt: number;
}

/**
 * When the lease ends, on the instance's clock: LEASE_LIFE_MS after the round trip began, or when
 * its earliest window ends, whichever is first. The window's end is measured from the store's
 * decision time but counted from `sentAt`, before that decision: the lease ends no later than the
 * window in real time, whatever the two clocks read.
 */
export function leaseExpiry(grant: LeaseGrant, sentAt: number): number {
  let life = LEASE_LIFE_MS;
  for (const window of grant.windows) life = Math.min(life, window.resetAt - grant.storeNow);
  return sentAt + Math.max(0, life);
}

export function newLease(holder: LeaseHolder, grant: LeaseGrant, sentAt: number): Lease {
  return { ...grant, holder, used: 0, sentAt, expiresAt: leaseExpiry(grant, sentAt) };
}

export function unitsLeft(lease: Lease): number {
  return lease.units - lease.used;
}

/** True when a request of `cost` may be admitted from the lease at instance time `now`. */
export function canAdmit(lease: Lease, cost: number, now: number): boolean {
  return now < lease.expiresAt && unitsLeft(lease) >= cost;
}

/** A window as the headers show it from a lease. */
export interface LeaseWindowView {
  name: RefusingWindow;
  limit: number;
  remaining: number;
  /** Store epoch ms the window starts afresh. */
  resetAt: number;
}

/**
 * The windows as headers show them while requests are admitted from the lease: never more
 * remaining than the store held at the lease's round trip (for the request that took it, the
 * lease's units not yet spent) minus what this instance admitted from the lease since. Other
 * instances' requests since are not seen: the view is at most one lease's life old.
 */
export function leaseWindowViews(lease: Lease): LeaseWindowView[] {
  return lease.windows.map((window) => ({
    name: window.name,
    limit: window.limit,
    remaining: Math.max(0, window.remaining + lease.units - lease.used),
    resetAt: window.resetAt,
  }));
}

/** What goes back to the store when a lease ends with units unused. */
export interface LeaseReturn {
  holder: LeaseHolder;
  units: number;
  /** The windows to give them back to, by the start the store counted them in; the store gives back only if that window is still the current one. */
  windows: readonly { name: RefusingWindow; startAt: number }[];
  /** True when every window the lease counted in was still open at its end, as the instance sees it. */
  complete: boolean;
  /** Store epoch ms the lease was taken: a window reset since keeps its units (the store compares). */
  takenAt: number;
  /** The units the lease took: what the store's ledger of units out in leases drops with its end. */
  granted: number;
  /** The lease counted in its consumer's windows: its consumer's ledger holds it too, whichever windows are still open. */
  inConsumerWindows: boolean;
}

/**
 * The return for a lease ending at instance time `now`: its unused units, to each window still
 * open (a window's end on the instance's clock counted from `sentAt`, as for the expiry). null
 * when nothing is left or every window has closed.
 */
export function leaseReturn(lease: Lease, now: number): LeaseReturn | null {
  const units = unitsLeft(lease);
  if (units <= 0) return null;
  const open = lease.windows.filter((window) => now < lease.sentAt + (window.resetAt - lease.storeNow));
  if (open.length === 0) return null;
  return {
    holder: lease.holder,
    units,
    windows: open.map((window) => ({ name: window.name, startAt: window.startAt })),
    complete: open.length === lease.windows.length,
    takenAt: lease.storeNow,
    granted: lease.units,
    inConsumerWindows: countsInConsumerWindows(lease),
  };
}

/**
 * A return of no units for a lease that has none to give back: it still takes the lease off the
 * store's ledger of units out in leases (before a window reset, so the reset does not count it).
 */
export function ledgerOnlyReturn(lease: Lease): LeaseReturn {
  return {
    holder: lease.holder,
    units: 0,
    windows: [],
    complete: false,
    takenAt: lease.storeNow,
    granted: lease.units,
    inConsumerWindows: countsInConsumerWindows(lease),
  };
}

function countsInConsumerWindows(lease: Lease): boolean {
  return lease.windows.some((window) => window.name.startsWith('consumer-'));
}
