/**
 * What the clients saw, counted per limit and per window: the harness's evidence. A window is
 * named by the gateway's own `X-RateLimit-Reset` on the admitted answer (the end of the minute
 * the store counted the request in, when the minute windows are the tightest), so a request
 * answered just after a minute turned still counts in the minute that admitted it.
 */

/** Admitted units of one limit (a key's, a consumer's) in one window. */
export interface WindowCount {
  limit: string;
  /** X-RateLimit-Reset (epoch seconds) of the admitted answers. */
  resetAt: number;
  units: number;
}

export class WindowTally {
  private readonly units = new Map<string, Map<number, number>>();
  readonly statuses = new Map<string, number>();
  /** Admitted answers without X-RateLimit-Reset: must stay 0 (the window would be unknown). */
  unnamed = 0;

  /** One answer (or `error` when none came) to a request of `units` counted in `limits`. */
  record(limits: readonly string[], units: number, answer: { status: number; resetAt: number | null } | 'error'): void {
    const label = answer === 'error' ? 'error' : String(answer.status);
    this.statuses.set(label, (this.statuses.get(label) ?? 0) + 1);
    if (answer === 'error' || !admitted(answer.status)) return;
    if (answer.resetAt === null) {
      this.unnamed++;
      return;
    }
    for (const limit of limits) {
      let windows = this.units.get(limit);
      if (!windows) this.units.set(limit, (windows = new Map()));
      windows.set(answer.resetAt, (windows.get(answer.resetAt) ?? 0) + units);
    }
  }

  windows(): WindowCount[] {
    const counts: WindowCount[] = [];
    for (const [limit, windows] of this.units)
      for (const [resetAt, units] of windows) counts.push({ limit, resetAt, units });
    return counts.sort((a, b) => a.limit.localeCompare(b.limit) || a.resetAt - b.resetAt);
  }

  /** Windows that admitted more than their limit (`limits`: units per window, by limit name). The invariant: none. */
  overAdmitted(limits: Readonly<Record<string, number>>): WindowCount[] {
    return this.windows().filter((count) => count.units > (limits[count.limit] ?? Infinity));
  }

  /**
   * Windows that admitted fewer than their limit minus `boundUnits` although their clients were
   * refused in them: under-admission beyond the documented bound (docs/scaling.md, leases: at most
   * the lease size per instance per window). Only meaningful for windows the clients filled and
   * where no fault swallowed admitted answers (a killed instance's counted requests, a timed-out
   * reply the store executed later): not asserted on the faulted run, kept for the lease phase's
   * fault-free stretches.
   */
  underAdmitted(
    limits: Readonly<Record<string, number>>,
    boundUnits: number,
    filled: ReadonlySet<string>,
  ): WindowCount[] {
    return this.windows().filter(
      (count) => filled.has(`${count.limit}@${count.resetAt}`) && count.units < (limits[count.limit] ?? 0) - boundUnits,
    );
  }

  summary(): string {
    const statuses = [...this.statuses].map(([status, n]) => `${status}: ${n}`).join(', ');
    const windows = this.windows()
      .map((c) => `${c.limit}@${new Date(c.resetAt * 1000).toISOString().slice(11, 19)}=${c.units}`)
      .join(' ');
    return `answers {${statuses}}; admitted units per window: ${windows}`;
  }
}

/** Forwarded to the inventory: a pet listed (200) or a pet id it does not hold (404). */
function admitted(status: number): boolean {
  return status === 200 || status === 404;
}
