import type { Answer, TalliedRequest, WindowTally } from './window-tally';

/** One client: a key sending one kind of request at a bounded rate, spread over the instances. */
export interface ClientPlan extends TalliedRequest {
  auth: string;
  /** Path under the gateway, e.g. /v1/pets. */
  path: string;
  /** Units each request takes (its operation's cost). */
  units: number;
  /** The limits (tally names) its admitted requests count in: its key's (`key:…`), its consumer's (`consumer:…`). */
  limits: string[];
  perSecond: number;
}

/** At most this many requests of one client in flight: a stalled instance slows a client, never floods it. */
export const MAX_IN_FLIGHT = 4;
/** A request with no answer after this long counts as an error (an instance killed under it, Redis paused). */
const ANSWER_TIMEOUT_MS = 5_000;

/**
 * Clients hammering the instances at a bounded rate: each client sends perSecond requests a
 * second (skipping a tick while MAX_IN_FLIGHT are out), to the instances in turn (each client its
 * own turn, so that an instance gets every n-th request of each client: the rate a process sees,
 * and so its leases, is bounded by the client's rate ÷ n), and records every answer in the tally.
 */
export class LoadClients {
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  sent = 0;

  constructor(
    private readonly targets: () => readonly string[],
    private readonly tally: WindowTally<ClientPlan>,
  ) {}

  start(plans: readonly ClientPlan[]): void {
    for (const plan of plans) {
      let out = 0;
      let turn = 0;
      const tick = () => {
        if (out >= MAX_IN_FLIGHT) return;
        out++;
        const sending = this.send(plan, turn++).finally(() => {
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

  private async send(plan: ClientPlan, turn: number): Promise<void> {
    const targets = this.targets();
    const target = targets[turn % targets.length]!;
    this.sent++;
    const sentAt = Date.now();
    let answer: Answer;
    try {
      const res = await fetch(`${target}${plan.path}`, {
        headers: { authorization: plan.auth },
        signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS),
      });
      answer = await readAnswer(res, plan, sentAt);
    } catch {
      answer = { status: 'error', resetAt: null, refusedBy: null, sentAt, answeredAt: Date.now() };
    }
    this.tally.record(plan, answer);
  }
}

/** The 429 body's `window` as the tally names limits: a key's minute, its consumer's minute. */
const LIMIT_PREFIX_BY_WINDOW: Readonly<Record<string, string>> = { minute: 'key:', 'consumer-minute': 'consumer:' };

/**
 * One answer as the tally counts it: the window its X-RateLimit-Reset names, and for a 429
 * rate_limited the limit whose window its body names (CONTRACT §3: `"window": "minute"` for the
 * key's, `"consumer-minute"` for its consumer's).
 */
export async function readAnswer(res: Response, request: TalliedRequest, sentAt: number): Promise<Answer> {
  const body = await res.text();
  const reset = res.headers.get('x-ratelimit-reset');
  let refusedBy: string | null = null;
  if (res.status === 429) {
    const { code, window } = JSON.parse(body) as { code?: string; window?: string };
    const prefix = code === 'rate_limited' && window !== undefined ? LIMIT_PREFIX_BY_WINDOW[window] : undefined;
    refusedBy = prefix === undefined ? null : (request.limits.find((limit) => limit.startsWith(prefix)) ?? null);
  }
  return {
    status: res.status,
    resetAt: reset === null ? null : Number(reset),
    refusedBy,
    sentAt,
    answeredAt: Date.now(),
  };
}
