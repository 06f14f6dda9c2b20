import type { WindowTally } from './window-tally';

/** One client: a key sending one kind of request at a bounded rate, spread over the instances. */
export interface ClientPlan {
  auth: string;
  /** Path under the gateway, e.g. /v1/pets. */
  path: string;
  /** Units each request takes (its operation's cost). */
  units: number;
  /** The limits (tally names) its admitted requests count in: its key's, its consumer's. */
  limits: string[];
  perSecond: number;
}

/** At most this many requests of one client in flight: a stalled instance slows a client, never floods it. */
const MAX_IN_FLIGHT = 4;
/** A request with no answer after this long counts as an error (an instance killed under it, Redis paused). */
const ANSWER_TIMEOUT_MS = 5_000;

/**
 * Clients hammering the instances at a bounded rate: each client sends perSecond requests a
 * second (skipping a tick while MAX_IN_FLIGHT are out), to the instances in turn, and records
 * every answer in the tally.
 */
export class LoadClients {
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private turn = 0;
  sent = 0;

  constructor(
    private readonly targets: () => readonly string[],
    private readonly tally: WindowTally,
  ) {}

  start(plans: readonly ClientPlan[]): void {
    for (const plan of plans) {
      let out = 0;
      const tick = () => {
        if (out >= MAX_IN_FLIGHT) return;
        out++;
        const sending = this.send(plan).finally(() => {
          out--;
          this.inFlight.delete(sending);
        });
        this.inFlight.add(sending);
      };
      this.timers.push(setInterval(tick, 1_000 / plan.perSecond));
    }
  }

  /** Stops sending and waits for the answers still out. */
  async stop(): Promise<void> {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    await Promise.all([...this.inFlight]);
  }

  private async send(plan: ClientPlan): Promise<void> {
    const targets = this.targets();
    const target = targets[this.turn++ % targets.length]!;
    this.sent++;
    try {
      const res = await fetch(`${target}${plan.path}`, {
        headers: { authorization: plan.auth },
        signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS),
      });
      await res.arrayBuffer();
      const reset = res.headers.get('x-ratelimit-reset');
      this.tally.record(plan.limits, plan.units, {
        status: res.status,
        resetAt: reset === null ? null : Number(reset),
      });
    } catch {
      this.tally.record(plan.limits, plan.units, 'error');
    }
  }
}
