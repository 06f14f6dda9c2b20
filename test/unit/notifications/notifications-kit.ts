import type { WebhookEventType } from '../../../src/shared/config';
import { createLogger, type Logger } from '../../../src/shared/logger';
import type { AttemptOutcome } from '../../../src/notifications/sender';
import type { ClaimedDelivery, Outbox, OutboxEvent } from '../../../src/notifications/outbox';

/**
 * Fakes for the notifications' pure logic (the dispatcher, the outbox writer): an outbox held in
 * memory with the semantics of outbox.ts (due times, leases that name a claim, attempts counted),
 * which records every call and can be told to refuse one; a sender whose answers the test gives.
 * The real outboxes (Redis, SQLite) run test/integration/notifications/outbox-contract.ts.
 */

export interface Row {
  endpoint: string;
  eventId: string;
  type: WebhookEventType;
  body: string;
  createdAt: number;
  attempts: number;
  dueAt: number;
  leaseUntil: number | null;
}

type Method = 'add' | 'claim' | 'finish' | 'retry' | 'release' | 'keepReceivers' | 'forgetInstance';

/** Resolves when `open` is called: lets a test hold a call where it stands. */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

export class MemoryOutbox implements Outbox {
  rows: Row[] = [];
  readonly calls: Array<{ method: Method; args: unknown[] }> = [];
  /** Errors the next calls of a method throw, one each. */
  readonly refuse: Partial<Record<Method, Error[]>> = {};
  /** A claim takes its deliveries (as a store would), then waits for this before answering. */
  claimGate: Promise<void> | null = null;
  /** An add (recorded as called) waits for this before it answers (or is refused). */
  addGate: Promise<void> | null = null;
  /** What add answers as dropped (the outbox's own bound), once. */
  dropOnNextAdd: WebhookEventType[] = [];

  private called(method: Method, args: unknown[]): void {
    this.calls.push({ method, args });
    this.answer(method);
  }

  /** Throws the next refusal of `method`, if one is set. */
  private answer(method: Method): void {
    const err = this.refuse[method]?.shift();
    if (err) throw err;
  }

  callsOf(method: Method): unknown[][] {
    return this.calls.filter((c) => c.method === method).map((c) => c.args);
  }

  async add(events: readonly OutboxEvent[], now: number, maxEvents: number): Promise<WebhookEventType[]> {
    this.calls.push({ method: 'add', args: [events.map((e) => e.id), now, maxEvents] });
    if (this.addGate) await this.addGate;
    this.answer('add');
    for (const event of events) {
      for (const endpoint of event.endpoints) {
        if (this.rows.some((r) => r.endpoint === endpoint && r.eventId === event.id)) continue;
        this.rows.push({
          endpoint,
          eventId: event.id,
          type: event.type,
          body: event.body,
          createdAt: event.createdAt,
          attempts: 0,
          dueAt: now,
          leaseUntil: null,
        });
      }
    }
    const dropped = this.dropOnNextAdd;
    this.dropOnNextAdd = [];
    return dropped;
  }

  async claim(endpoint: string, max: number, now: number, leaseUntil: number): Promise<ClaimedDelivery[]> {
    this.called('claim', [endpoint, max, now, leaseUntil]);
    const due = this.rows
      .filter((r) => r.endpoint === endpoint && r.dueAt <= now && (r.leaseUntil === null || r.leaseUntil <= now))
      .sort((a, b) => a.dueAt - b.dueAt)
      .slice(0, max);
    for (const row of due) row.leaseUntil = leaseUntil;
    const claimed = due.map(({ dueAt: _dueAt, leaseUntil: _lease, ...rest }) => ({ ...rest, leaseUntil }));
    if (this.claimGate) await this.claimGate;
    return claimed;
  }

  /** The row a claim names, while the claim still holds it. */
  private held(delivery: ClaimedDelivery): Row | undefined {
    return this.rows.find(
      (r) => r.endpoint === delivery.endpoint && r.eventId === delivery.eventId && r.leaseUntil === delivery.leaseUntil,
    );
  }

  async finish(delivery: ClaimedDelivery): Promise<void> {
    this.called('finish', [delivery.eventId]);
    const row = this.held(delivery);
    if (row) this.rows.splice(this.rows.indexOf(row), 1);
  }

  async retry(delivery: ClaimedDelivery, nextAt: number): Promise<void> {
    this.called('retry', [delivery.eventId, nextAt]);
    if (!Number.isFinite(nextAt)) throw new Error(`retry at ${String(nextAt)}`);
    const row = this.held(delivery);
    if (row) Object.assign(row, { attempts: row.attempts + 1, dueAt: nextAt, leaseUntil: null });
  }

  async release(delivery: ClaimedDelivery, now: number): Promise<void> {
    this.called('release', [delivery.eventId, now]);
    const row = this.held(delivery);
    if (row) Object.assign(row, { dueAt: now, leaseUntil: null });
  }

  /** What the next keepReceivers calls answer as dropped, one each (then nothing). */
  readonly keepAnswers: WebhookEventType[][] = [];
  /** A keepReceivers call waits for this before it answers. */
  keepGate: Promise<void> | null = null;

  async keepReceivers(
    instance: string,
    endpoints: readonly string[],
    now: number,
    liveUntil: number,
    maxDrops: number,
  ): Promise<WebhookEventType[]> {
    this.calls.push({ method: 'keepReceivers', args: [instance, [...endpoints], now, liveUntil, maxDrops] });
    if (this.keepGate) await this.keepGate;
    this.answer('keepReceivers');
    return this.keepAnswers.shift() ?? [];
  }

  async forgetInstance(instance: string): Promise<void> {
    this.called('forgetInstance', [instance]);
  }

  async size(): Promise<number> {
    return new Set(this.rows.map((r) => r.eventId)).size;
  }

  close(): void {}
}

export interface Post {
  url: string;
  headers: Record<string, string>;
  body: string;
  stop: AbortSignal;
  /** Answers the attempt (a sender never throws: a failure is an outcome). */
  answer(outcome: AttemptOutcome): void;
}

/**
 * A sender whose attempts wait for the test's answer, or answer at once by `auto`; an attempt
 * still open when `stop` aborts ends as the real one does: not delivered.
 */
export class ScriptedSender {
  readonly posts: Post[] = [];
  /** Attempts not answered yet. */
  open = 0;
  /** The most attempts open at once, per URL. */
  readonly mostOpen = new Map<string, number>();
  private readonly openByUrl = new Map<string, number>();

  /** `auto` answers each attempt at once; null from it (or no `auto`) leaves the attempt open. */
  constructor(
    public auto: ((url: string) => AttemptOutcome | null) | null = () => ({ delivered: true, status: 204 }),
  ) {}

  postsTo(url: string): Post[] {
    return this.posts.filter((p) => p.url === url);
  }

  post(url: string, headers: Record<string, string>, body: string, stop: AbortSignal): Promise<AttemptOutcome> {
    return new Promise((resolve) => {
      let done = false;
      this.open += 1;
      const now = (this.openByUrl.get(url) ?? 0) + 1;
      this.openByUrl.set(url, now);
      this.mostOpen.set(url, Math.max(this.mostOpen.get(url) ?? 0, now));
      const answer = (outcome: AttemptOutcome) => {
        if (done) return;
        done = true;
        this.open -= 1;
        this.openByUrl.set(url, this.openByUrl.get(url)! - 1);
        resolve(outcome);
      };
      this.posts.push({ url, headers, body, stop, answer });
      if (stop.aborted) answer({ delivered: false, reason: 'AbortError' });
      stop.addEventListener('abort', () => answer({ delivered: false, reason: 'AbortError' }), { once: true });
      const outcome = this.auto?.(url) ?? null;
      if (outcome !== null) answer(outcome);
    });
  }
}

/** A logger whose lines the test reads back with the kit's reader (test/support/log-lines.ts). */
export function capturedLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger = createLogger('info', {
    write(line: string) {
      lines.push(line.trimEnd());
    },
  });
  return { logger, lines };
}

/** An outbox event for `endpoints`, seen at `createdAt`. */
export function outboxEvent(id: string, endpoints: readonly string[], createdAt: number): OutboxEvent {
  const type: WebhookEventType = 'quota.threshold';
  return {
    id,
    type,
    body: JSON.stringify({ type, timestamp: new Date(createdAt).toISOString(), data: { n: id } }),
    createdAt,
    seenUntil: createdAt + 86_400_000,
    endpoints,
  };
}
