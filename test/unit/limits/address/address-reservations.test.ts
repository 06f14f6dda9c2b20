import { ManualClock } from '../../../../src/shared/clock';
import {
  AddressReservations,
  type Reservation,
  type ReservationSource,
} from '../../../../src/limits/address/address-reservations';

/** A shared window as Redis would keep it: one count per address, `perMinute` units a window. */
class SharedWindow implements ReservationSource {
  consumed = new Map<string, number>();
  calls = 0;
  resetAtNow: (() => number) | null = null;
  constructor(
    private readonly perMinute: number,
    private readonly clock: ManualClock,
    private readonly resetAt: number,
  ) {}
  async reserve(address: string, units: number): Promise<Reservation> {
    this.calls++;
    const before = this.consumed.get(address) ?? 0;
    const after = before + units;
    this.consumed.set(address, after);
    const granted = Math.min(units, Math.max(0, this.perMinute - before));
    return { granted, remaining: Math.max(0, this.perMinute - after), resetAt: this.resetAtNow?.() ?? this.resetAt };
  }
}

describe('AddressReservations', () => {
  const clock = new ManualClock();
  const resetAt = clock.now() + 60_000;

  it('hands out the limit from batches of units: one store call per batch, then none once refused', async () => {
    const shared = new SharedWindow(30, clock, resetAt);
    const reservations = new AddressReservations(shared, 30, clock, 10);
    const decisions = await Promise.all(Array.from({ length: 500 }, () => reservations.consume('192.0.2.1')));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(30);
    expect(shared.calls).toBe(4); // three batches of 10, and the one that found none left
    const refused = decisions.find((d) => !d.allowed)!;
    expect(refused.window).toEqual({ limit: 30, remaining: 0, resetAt });
    expect(refused.retryAfterMs).toBe(60_000);
    // Remaining counts down through the held units, as the headers must.
    expect(decisions.slice(0, 3).map((d) => d.window.remaining)).toEqual([29, 28, 27]);
  });

  it('never admits more than the limit over several instances, and loses at most units - 1 per instance', async () => {
    const shared = new SharedWindow(30, clock, resetAt);
    const instances = [1, 2, 3].map(() => new AddressReservations(shared, 30, clock, 10));
    let admitted = 0;
    for (let i = 0; i < 300; i++) if ((await instances[i % 3]!.consume('192.0.2.2')).allowed) admitted++;
    expect(admitted).toBeLessThanOrEqual(30);
    expect(admitted).toBeGreaterThanOrEqual(30 - 3 * 9);
  });

  it('starts a new batch when the window has ended', async () => {
    const local = new ManualClock();
    const shared = new SharedWindow(2, local, local.now() + 60_000);
    shared.resetAtNow = () => local.now() + 60_000;
    const reservations = new AddressReservations(shared, 2, local, 10);
    expect((await reservations.consume('a')).allowed).toBe(true);
    expect((await reservations.consume('a')).allowed).toBe(true);
    expect((await reservations.consume('a')).allowed).toBe(false);
    local.advance(60_000);
    shared.consumed.clear();
    expect((await reservations.consume('a')).allowed).toBe(true);
  });

  it('gives held units to any anonymous request of the address first (takeHeld)', async () => {
    const shared = new SharedWindow(3, clock, resetAt);
    const reservations = new AddressReservations(shared, 3, clock, 10);
    expect(reservations.takeHeld('b')).toBeNull();
    await reservations.consume('b');
    expect(reservations.held('b')).toBe(2);
    expect(reservations.takeHeld('b')).toMatchObject({ allowed: true, window: { remaining: 1 } });
    expect(reservations.held('b')).toBe(1);
  });

  it('passes a store failure on to the caller (the fail mode decides) and tries again next time', async () => {
    const failing: ReservationSource = { reserve: () => Promise.reject(new Error('down')) };
    const reservations = new AddressReservations(failing, 3, clock, 10);
    await expect(reservations.consume('c')).rejects.toThrow('down');
    await expect(reservations.consume('c')).rejects.toThrow('down');
  });
});
