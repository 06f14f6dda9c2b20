/**
 * What the clients saw, counted per limit and per window: the harness's evidence. A window is
 * named by the gateway's own `X-RateLimit-Reset` on the answer (the end of the minute the store
 * counted the request in, when the minute windows are the tightest), so a request answered just
 * after a minute turned still counts in the minute that admitted it.
 */

/** Admitted units of one limit (a key's, a consumer's) in one window. */
export interface WindowCount {
  limit: string;
  /** X-RateLimit-Reset (epoch seconds) of the admitted answers. */
  resetAt: number;
  units: number;
}

/** What one client sends: the limits (tally names) its requests count in and their units. */
export interface TalliedRequest {
  limits: readonly string[];
  units: number;
}

/** One request's fate as its client saw it. */
export interface Answer {
  /** The HTTP status, or `error` when none came (connection reset, an instance killed, no answer in time). */
  status: number | 'error';
  /** X-RateLimit-Reset (epoch seconds); null when absent. */
  resetAt: number | null;
  /** For a 429 `rate_limited`: the limit (tally name) whose window its body's `window` names; else null. */
  refusedBy: string | null;
  /** Client epoch ms the request was sent and its answer (or error) came. */
  sentAt: number;
  answeredAt: number;
}

/**
 * A request that got no answer, or a 5xx: the store may have counted it (and a lease with it, or
 * not taken back the lease its round trip carried) without any client seeing it admitted.
 */
export interface UnansweredRequest<R extends TalliedRequest = TalliedRequest> {
  request: R;
  sentAt: number;
  answeredAt: number;
}

export class WindowTally<R extends TalliedRequest = TalliedRequest> {
  private readonly units = new Map<string, Map<number, number>>();
  /** Windows a limit refused a request in (429 rate_limited naming that limit's window), by limit. */
  private readonly refused = new Map<string, Set<number>>();
  readonly statuses = new Map<string, number>();
  readonly unanswered: UnansweredRequest<R>[] = [];
  /** Admitted answers without X-RateLimit-Reset: must stay 0 (the window would be unknown). */
  unnamed = 0;
  /** 429 rate_limited answers whose window no limit of the request claims (or with no X-RateLimit-Reset): must stay 0. */
  unnamedRefusals = 0;

  record(request: R, answer: Answer): void {
    const label = String(answer.status);
    this.statuses.set(label, (this.statuses.get(label) ?? 0) + 1);
    if (answer.status === 'error' || answer.status >= 500) {
      this.unanswered.push({ request, sentAt: answer.sentAt, answeredAt: answer.answeredAt });
      return;
    }
    if (answer.status === 429) return this.recordRefusal(answer);
    if (!admitted(answer.status)) return;
    if (answer.resetAt === null) {
      this.unnamed++;
      return;
    }
    for (const limit of request.limits) {
      let windows = this.units.get(limit);
      if (!windows) this.units.set(limit, (windows = new Map()));
      windows.set(answer.resetAt, (windows.get(answer.resetAt) ?? 0) + request.units);
    }
  }

  private recordRefusal(answer: Answer): void {
    if (answer.refusedBy === null || answer.resetAt === null) {
      this.unnamedRefusals++;
      return;
    }
    let windows = this.refused.get(answer.refusedBy);
    if (!windows) this.refused.set(answer.refusedBy, (windows = new Set()));
    windows.add(answer.resetAt);
  }

  windows(): WindowCount[] {
    const counts: WindowCount[] = [];
    for (const [limit, windows] of this.units)
      for (const [resetAt, units] of windows) counts.push({ limit, resetAt, units });
    return counts.sort((a, b) => a.limit.localeCompare(b.limit) || a.resetAt - b.resetAt);
  }

  /** Admitted units of `limit` in the window that resets at `resetAt` (0 when none). */
  admittedIn(limit: string, resetAt: number): number {
    return this.units.get(limit)?.get(resetAt) ?? 0;
  }

  /** The windows each limit filled: its clients were refused in them by that limit. */
  filled(): WindowCount[] {
    const filled: WindowCount[] = [];
    for (const [limit, windows] of this.refused)
      for (const resetAt of windows) filled.push({ limit, resetAt, units: this.admittedIn(limit, resetAt) });
    return filled.sort((a, b) => a.limit.localeCompare(b.limit) || a.resetAt - b.resetAt);
  }

  /** Windows that admitted more than their limit (`limits`: units per window, by limit name). The invariant: none. */
  overAdmitted(limits: Readonly<Record<string, number>>): WindowCount[] {
    return this.windows().filter((count) => count.units > (limits[count.limit] ?? Infinity));
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
